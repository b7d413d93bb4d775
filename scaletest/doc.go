// Package scaletest holds the scale-out, fault and throughput tests of the
// authorization server (durable storage, scale-out, faults): real `authserver` processes built from
// cmd/authserver, real PostgreSQL (AUTHSERVER_TEST_POSTGRES, one schema or
// database per test; a private cluster for the restart test), real SQLite
// files, real HTTP on 127.0.0.1 and real clients (golang.org/x/oauth2 and
// rsmiddleware.Verifier).
//
// The package has no non-test code; scaletest/load is the load generator
// shared with cmd/loadgen. The benchmarks (go test -run XXX -bench .
// ./scaletest) measure the token and introspection endpoints of a served
// binary with 32 connections on each backend; see docs/BENCHMARKS.md.
package scaletest
