// The TypeScript MCP SDK v2 client (@modelcontextprotocol/client) against
// the example MCP server and authserver: discovery, dynamic client
// registration, authorization without state (the SDK checks RFC 9207 iss in
// finishAuth), a tool call, the SDK's own step-up to the union of scopes for
// the same client_id, and a refresh.
import { Client, StreamableHTTPClientTransport, UnauthorizedError } from '@modelcontextprotocol/client';
import { MemoryProvider, browse, claims, env, report, run, step, toolResult } from './lib.mjs';

const mcpURL = new URL(env('MCP_URL'));
const redirectURI = env('REDIRECT_URI');

run(async () => {
  const provider = new MemoryProvider(redirectURI, 'mcpauth foreign client: SDK v2');
  const newTransport = () => new StreamableHTTPClientTransport(mcpURL, { authProvider: provider });
  // authorize opens the URL the SDK asked for and hands the whole callback
  // query to finishAuth, which validates iss before it redeems the code.
  const authorize = async (transport) => {
    const cb = await browse(provider.takePending());
    await transport.finishAuth(cb.searchParams);
  };

  // 1. No token: 401, discovery, registration, authorization, code exchange.
  let transport = newTransport();
  let client = new Client({ name: 'mcpauth-foreign-sdk-v2', version: '1.0.0' });
  let connected = false;
  try {
    await client.connect(transport);
    connected = true;
  } catch (err) {
    if (!(err instanceof UnauthorizedError)) throw err;
  }
  if (connected) throw new Error('connected without authorization');
  await authorize(transport);
  transport = newTransport();
  client = new Client({ name: 'mcpauth-foreign-sdk-v2', version: '1.0.0' });
  await client.connect(transport);
  step('authorized as ' + provider.registrations.join(' '));
  const whoami = toolResult(await client.callTool({ name: 'whoami', arguments: {} }));

  step('whoami called');
  // 2. Step-up: 403 insufficient_scope; the SDK re-authorizes for the union
  // of the scopes it holds and the challenge's.
  let stepped403 = false;
  try {
    await client.callTool({ name: 'admin_stats', arguments: {} });
  } catch (err) {
    if (!(err instanceof UnauthorizedError)) throw err;
    stepped403 = true;
  }
  if (!stepped403) throw new Error('admin_stats succeeded with a token lacking mcp:admin');
  await authorize(transport);
  step('stepped up');
  const admin = toolResult(await client.callTool({ name: 'admin_stats', arguments: {} }));
  const stepped = provider.tokens();

  step('admin_stats called');
  // 3. Refresh: the access token stops working (as when it expires); the
  // next call gets 401 invalid_token and the SDK redeems the refresh token.
  provider._tokens = { ...stepped, access_token: 'no-longer-valid' };
  const refreshedWhoami = toolResult(await client.callTool({ name: 'whoami', arguments: {} }));
  step('called after the refresh');
  const refreshed = provider.tokens();
  await client.close();

  report({
    client: 'sdk-v2',
    registrations: provider.registrations,
    whoami,
    admin,
    refreshedWhoami,
    stepUp: 'sdk',
    steppedAccessToken: stepped.access_token,
    steppedRefreshToken: stepped.refresh_token,
    refreshedAccessToken: refreshed.access_token,
    refreshedRefreshToken: refreshed.refresh_token,
    scopes: provider.issued.map((t) => t.scope),
    jtis: provider.issued.map((t) => claims(t.access_token).jti),
  });
});
