package dcr_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/mcpauth/mcpauth/storage"
	"github.com/mcpauth/mcpauth/storage/postgres"
	"github.com/mcpauth/mcpauth/storage/postgres/pgtest"
	"github.com/mcpauth/mcpauth/storage/sqlite"
)

// storeTests are the tests whose outcome depends on storage semantics
// (create, the UpdateClient transaction, delete, touch, reap, count).
var storeTests = []struct {
	name string
	fn   func(*testing.T)
}{
	{"ClientProfilesRegister", TestClientProfilesRegister},
	{"ClaudeReRegistersOnEveryConnect", TestClaudeReRegistersOnEveryConnect},
	{"ConfidentialClientSecretIsStoredHashed", TestConfidentialClientSecretIsStoredHashed},
	{"RFC7592Management", TestRFC7592Management},
	{"RegistrationFloodIsLimited", TestRegistrationFloodIsLimited},
	{"ReapDeletesNeverUsedAndIdleClients", TestReapDeletesNeverUsedAndIdleClients},
	{"CIMDClientProfiles", TestCIMDClientProfiles},
	{"CIMDRefreshKeepsUsageOfTheStoredClient", TestCIMDRefreshKeepsUsageOfTheStoredClient},
	{"CIMDRefusesHostileDestinations", TestCIMDRefusesHostileDestinations},
	{"HostileRegistrationRequests", TestHostileRegistrationRequests},
	{"CIMDRefusesNULAndInvalidUTF8", TestCIMDRefusesNULAndInvalidUTF8},
}

func runOn(t *testing.T, open func(t testing.TB) storage.ClientStore) {
	saved := newStore
	newStore = open
	defer func() { newStore = saved }()
	for _, st := range storeTests {
		t.Run(st.name, st.fn)
	}
}

// TestOnPostgreSQL runs the storage-sensitive tests on real PostgreSQL
// (AUTHSERVER_TEST_POSTGRES; skipped when unset unless CI is set).
func TestOnPostgreSQL(t *testing.T) {
	pgtest.BaseDSN(t)
	runOn(t, func(t testing.TB) storage.ClientStore {
		dsn, _ := pgtest.Schema(t)
		s, err := postgres.Open(context.Background(), dsn, postgres.Options{MaxConns: 4})
		if err != nil {
			t.Fatalf("postgres.Open: %v", err)
		}
		t.Cleanup(func() { s.Close() })
		if _, err := s.Migrate(context.Background()); err != nil {
			t.Fatalf("Migrate: %v", err)
		}
		return s
	})
}

// TestOnSQLite runs the storage-sensitive tests on an SQLite file.
func TestOnSQLite(t *testing.T) {
	runOn(t, func(t testing.TB) storage.ClientStore {
		s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "dcr.db"))
		if err != nil {
			t.Fatalf("sqlite.Open: %v", err)
		}
		t.Cleanup(func() { s.Close() })
		if _, err := s.Migrate(context.Background()); err != nil {
			t.Fatalf("Migrate: %v", err)
		}
		return s
	})
}
