// A TypeScript MCP SDK client (SDK=v1: @modelcontextprotocol/sdk 1.x,
// SDK=v2: @modelcontextprotocol/client) against mcpgateway in front of the
// TypeScript MCP server of ../tsserver: the 401, the gateway's protected
// resource metadata, the AS, dynamic client registration, authorization
// without state, tools/list without the admin tool, the 403 step-up to
// mcp:admin for the same client_id (the application drives it on SDK 1.x,
// the SDK itself on v2), tools/list with it, and a tools/call of it. Every
// HTTP exchange the SDK makes is reported (method, URL, status).
import { MemoryProvider, browse, env, expectUnauthorized, report, run, step } from './lib.mjs';

const mcpURL = new URL(env('MCP_URL'));
const redirectURI = env('REDIRECT_URI');
const sdk = env('SDK');

const lib = sdk === 'v1'
  ? {
      ...(await import('@modelcontextprotocol/sdk/client/index.js')),
      ...(await import('@modelcontextprotocol/sdk/client/streamableHttp.js')),
      ...(await import('@modelcontextprotocol/sdk/client/auth.js')),
    }
  : await import('@modelcontextprotocol/client');
const { Client, StreamableHTTPClientTransport, UnauthorizedError, auth } = lib;

run(async () => {
  const provider = new MemoryProvider(redirectURI, `mcpauth foreign gateway client: SDK ${sdk}`);
  const requests = [];
  let challenge = ''; // the last WWW-Authenticate
  const fetchFn = async (url, init) => {
    const resp = await fetch(url, init);
    requests.push({ method: init?.method ?? 'GET', url: String(url), status: resp.status });
    const h = resp.headers.get('www-authenticate');
    if (h) challenge = h;
    return resp;
  };
  const newTransport = () => new StreamableHTTPClientTransport(mcpURL, { authProvider: provider, fetch: fetchFn });
  const newClient = () => new Client({ name: `mcpauth-foreign-gateway-${sdk}`, version: '1.0.0' });
  const authorize = async (transport) => {
    const cb = await browse(provider.takePending());
    if (cb.searchParams.has('error')) throw new Error('authorization error response: ' + cb.search);
    // SDK 1.x takes the code; v2 the whole query (it checks RFC 9207 iss).
    await transport.finishAuth(sdk === 'v1' ? cb.searchParams.get('code') : cb.searchParams);
  };
  const toolNames = async (client) => (await client.listTools()).tools.map((t) => t.name).sort();
  const text = (res) => {
    if (res.isError) throw new Error('tool error: ' + JSON.stringify(res.content));
    return res.content[0].text;
  };

  // 1. No token: 401, discovery, registration, authorization, code exchange.
  let transport = newTransport();
  let client = newClient();
  await expectUnauthorized(client, transport, UnauthorizedError);
  await authorize(transport);
  transport = newTransport();
  client = newClient();
  await client.connect(transport);
  step('authorized as ' + provider.registrations.join(' '));
  const toolsBefore = await toolNames(client);
  const echo = text(await client.callTool({ name: 'echo', arguments: { text: 'through the gateway' } }));

  // 2. Step-up: admin_stats needs mcp:admin; the gateway answers 403
  // insufficient_scope naming every scope the call needs.
  let stepUp = 'sdk';
  try {
    await client.callTool({ name: 'admin_stats', arguments: {} });
    throw new Error('admin_stats succeeded with a token lacking mcp:admin');
  } catch (err) {
    if (err instanceof UnauthorizedError) {
      await authorize(transport);
    } else if (sdk === 'v1' && err instanceof lib.StreamableHTTPError && err.code === 403) {
      // SDK 1.x stops at the 403 (after a refresh that cannot widen the
      // grant); the application re-authorizes the same client for the
      // challenge's scope with the SDK's own auth().
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
  step('stepped up by the ' + stepUp);
  const admin = text(await client.callTool({ name: 'admin_stats', arguments: {} }));
  const toolsAfter = await toolNames(client);
  await client.close();
  report({
    client: 'gateway-' + sdk,
    registrations: provider.registrations,
    stepUp,
    challengeScope: /scope="([^"]*)"/.exec(challenge)?.[1] ?? '',
    toolsBefore,
    toolsAfter,
    echo,
    adminText: admin,
    requests,
    scopes: provider.issued.map((t) => t.scope),
    steppedAccessToken: provider.tokens().access_token,
  });
});
