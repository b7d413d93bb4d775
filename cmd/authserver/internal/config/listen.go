package config

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
)

// issuerForListen is the development issuer for a listen address: plain http
// on that address, with an unspecified host (":9500", "0.0.0.0:9500",
// "[::]:9500") read as 127.0.0.1. An address that does not make such a URL
// gives the default issuer; validation then reports the listen address.
func issuerForListen(listen string) string {
	host, port, err := net.SplitHostPort(listen)
	if err != nil || port == "" {
		return DefaultIssuer
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return DefaultIssuer
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	iss := "http://" + net.JoinHostPort(host, port)
	if u, err := url.Parse(iss); err != nil || u.Host != net.JoinHostPort(host, port) || u.Path != "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return DefaultIssuer
	}
	return iss
}

// issuerPortWarning is a warning when the issuer is on loopback but on
// another port than listen: the metadata, the iss of every token and the
// RFC 9207 iss then send clients to a port this server does not answer on
// (unless a proxy on that port forwards to listen).
func (c *Config) issuerPortWarning() string {
	u, err := url.Parse(c.Issuer)
	if err != nil || !IsLoopback(u.Hostname()) {
		return ""
	}
	_, listenPort, err := net.SplitHostPort(c.Listen)
	if err != nil {
		return ""
	}
	issuerPort := u.Port()
	if issuerPort == "" {
		issuerPort = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	if issuerPort == listenPort {
		return ""
	}
	return fmt.Sprintf("issuer %s is on loopback port %s but listen is %s: discovery and tokens point at a port this server does not listen on (set issuer to match listen, or run a proxy on port %s)",
		c.Issuer, issuerPort, c.Listen, issuerPort)
}
