// The TypeScript MCP SDK 1.x client (@modelcontextprotocol/sdk) against the
// example MCP server and authserver: discovery, dynamic client registration,
// authorization without state, a tool call, step-up to mcp:admin for the
// same client_id, and a refresh.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport, StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { UnauthorizedError, auth } from '@modelcontextprotocol/sdk/client/auth.js';
import { MemoryProvider, browse, env, expectUnauthorized, refreshAndReport, run, step, toolResult } from './lib.mjs';

const mcpURL = new URL(env('MCP_URL'));
const redirectURI = env('REDIRECT_URI');

run(async () => {
  const provider = new MemoryProvider(redirectURI, 'mcpauth foreign client: SDK 1.x');
  let challenge = ''; // the last WWW-Authenticate the MCP server sent
  const fetchFn = async (url, init) => {
    const resp = await fetch(url, init);
    const h = resp.headers.get('www-authenticate');
    if (h) challenge = h;
    return resp;
  };
  const connect = async () => {
    const transport = new StreamableHTTPClientTransport(mcpURL, { authProvider: provider, fetch: fetchFn });
    const client = new Client({ name: 'mcpauth-foreign-sdk-v1', version: '1.0.0' });
    await client.connect(transport);
    return { client, transport };
  };
  // authorize opens the URL the SDK asked for and redeems the code the AS
  // redirected back with, through the transport (SDK 1.x: code only).
  const authorize = async (transport) => {
    const cb = await browse(provider.takePending());
    if (cb.searchParams.has('error')) throw new Error('authorization error response: ' + cb.search);
    await transport.finishAuth(cb.searchParams.get('code'));
  };

  // 1. No token: 401, discovery, registration, authorization, code exchange.
  let transport = new StreamableHTTPClientTransport(mcpURL, { authProvider: provider, fetch: fetchFn });
  let client = new Client({ name: 'mcpauth-foreign-sdk-v1', version: '1.0.0' });
  await expectUnauthorized(client, transport, UnauthorizedError);
  await authorize(transport);
  ({ client, transport } = await connect());
  step('authorized as ' + provider.registrations.join(' '));
  const whoami = toolResult(await client.callTool({ name: 'whoami', arguments: {} }));

  step('whoami called');
  // 2. Step-up: admin_stats needs mcp:admin; the server answers 403
  // insufficient_scope naming every scope the call needs.
  let stepUp = 'sdk';
  try {
    await client.callTool({ name: 'admin_stats', arguments: {} });
    throw new Error('admin_stats succeeded with a token lacking mcp:admin');
  } catch (err) {
    if (err instanceof UnauthorizedError) {
      await authorize(transport);
    } else if (err instanceof StreamableHTTPError && err.code === 403) {
      // SDK 1.x answers the 403 by refreshing when it holds a refresh token
      // (a refresh never widens a grant) and stops when the retry gets the
      // same 403. The application then re-authorizes the same client for
      // the scope of the challenge, with the SDK's own auth().
      stepUp = 'application';
      const scope = /scope="([^"]*)"/.exec(challenge)?.[1];
      if (!scope || !scope.includes('mcp:admin')) throw new Error('403 challenge without mcp:admin: ' + challenge);
      provider.invalidateCredentials('tokens');
      const r = await auth(provider, { serverUrl: mcpURL, scope, fetchFn });
      if (r !== 'REDIRECT') throw new Error('auth() for the step-up returned ' + r);
      await authorize(transport);
    } else {
      throw err;
    }
  }
  step('stepped up');
  const admin = toolResult(await client.callTool({ name: 'admin_stats', arguments: {} }));
  // 3. Refresh, then the report.
  await refreshAndReport('sdk-v1', provider, client, { whoami, admin, stepUp });
});
