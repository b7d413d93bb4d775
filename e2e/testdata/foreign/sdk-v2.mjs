// The TypeScript MCP SDK v2 client (@modelcontextprotocol/client) against
// the example MCP server and authserver: discovery, dynamic client
// registration, authorization without state (the SDK checks RFC 9207 iss in
// finishAuth), a tool call, the SDK's own step-up to the union of scopes for
// the same client_id, and a refresh.
import { Client, StreamableHTTPClientTransport, UnauthorizedError } from '@modelcontextprotocol/client';
import { MemoryProvider, browse, env, expectUnauthorized, refreshAndReport, run, step, toolResult } from './lib.mjs';

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
  await expectUnauthorized(client, transport, UnauthorizedError);
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
  // 3. Refresh, then the report.
  await refreshAndReport('sdk-v2', provider, client, { whoami, admin, stepUp: 'sdk' });
});
