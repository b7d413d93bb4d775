// The TypeScript MCP SDK 1.x machine-to-machine providers against the
// example MCP server and authserver: ClientCredentialsProvider
// (client_secret_basic) and PrivateKeyJwtProvider (an ES256 client
// assertion, RFC 7523 §2.2), each getting a token with the client
// credentials grant and calling whoami.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ClientCredentialsProvider, PrivateKeyJwtProvider } from '@modelcontextprotocol/sdk/client/auth-extensions.js';
import { claims, env, report, run, step, toolResult } from './lib.mjs';

const mcpURL = new URL(env('MCP_URL'));
const issuer = env('AS_ISSUER');

async function whoami(provider, name) {
  const transport = new StreamableHTTPClientTransport(mcpURL, { authProvider: provider });
  const client = new Client({ name, version: '1.0.0' });
  await client.connect(transport);
  const who = toolResult(await client.callTool({ name: 'whoami', arguments: {} }));
  const tokens = provider.tokens();
  await client.close();
  const c = claims(tokens.access_token);
  return { whoami: who, tokenType: tokens.token_type, refresh: Boolean(tokens.refresh_token), aud: c.aud, scope: tokens.scope };
}

run(async () => {
  const secret = await whoami(new ClientCredentialsProvider({
    clientId: env('CC_CLIENT_ID'), clientSecret: env('CC_CLIENT_SECRET'), expectedIssuer: issuer, scope: 'mcp:tools',
  }), 'mcpauth-foreign-cc-secret');
  step('client_secret_basic: whoami called');
  const jwt = await whoami(new PrivateKeyJwtProvider({
    clientId: env('JWT_CLIENT_ID'), privateKey: env('JWT_CLIENT_KEY'), algorithm: 'ES256', expectedIssuer: issuer, scope: 'mcp:tools',
  }), 'mcpauth-foreign-cc-jwt');
  step('private_key_jwt: whoami called');
  report({ client: 'sdk-cc', secret, jwt });
});
