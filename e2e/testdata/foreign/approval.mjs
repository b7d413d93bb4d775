// A TypeScript MCP SDK client (SDK=v2: @modelcontextprotocol/client, which
// declares URL-mode elicitation; SDK=v1: @modelcontextprotocol/sdk 1.x, the
// same declaration) against mcpgateway with approval.tools: it signs in
// (DCR, authorization code), calls send_email with ARGS (JSON), expects the
// gateway's -32042 URL elicitation error, hands its URL to the Go test (the
// person approves in a browser) and retries: the retry runs once, a second
// retry is held again, and so is a call with OTHER_ARGS.
import { MemoryProvider, ask, browse, env, expectUnauthorized, report, run, step } from './lib.mjs';

const mcpURL = new URL(env('MCP_URL'));
const redirectURI = env('REDIRECT_URI');
const sdk = env('SDK');
const args = JSON.parse(env('ARGS'));
const otherArgs = JSON.parse(env('OTHER_ARGS'));

const lib = sdk === 'v1'
  ? {
      ...(await import('@modelcontextprotocol/sdk/client/index.js')),
      ...(await import('@modelcontextprotocol/sdk/client/streamableHttp.js')),
      ...(await import('@modelcontextprotocol/sdk/client/auth.js')),
      ...(await import('@modelcontextprotocol/sdk/types.js')),
    }
  : await import('@modelcontextprotocol/client');
const { Client, StreamableHTTPClientTransport, UnauthorizedError, UrlElicitationRequiredError } = lib;

run(async () => {
  const provider = new MemoryProvider(redirectURI, `mcpauth approval client: SDK ${sdk}`);
  const newTransport = () => new StreamableHTTPClientTransport(mcpURL, { authProvider: provider });
  const newClient = () => new Client({ name: `mcpauth-approval-${sdk}`, version: '1.0.0' },
    { capabilities: { elicitation: { url: {} } } });
  let transport = newTransport();
  let client = newClient();
  await expectUnauthorized(client, transport, UnauthorizedError);
  const cb = await browse(provider.takePending());
  await transport.finishAuth(sdk === 'v1' ? cb.searchParams.get('code') : cb.searchParams);
  transport = newTransport();
  client = newClient();
  await client.connect(transport);
  step('connected');

  // held returns the elicitation of a call the gateway holds, failing when
  // the call runs or fails otherwise.
  const held = async (a) => {
    try {
      const res = await client.callTool({ name: 'send_email', arguments: a });
      throw new Error('the call was not held: ' + JSON.stringify(res));
    } catch (err) {
      if (!(err instanceof UrlElicitationRequiredError)) throw err;
      if (err.code !== -32042 || err.elicitations.length !== 1) throw new Error('unexpected elicitation error ' + JSON.stringify(err));
      const e = err.elicitations[0];
      return { mode: e.mode, url: e.url, elicitationId: e.elicitationId, message: e.message, errorMessage: err.message };
    }
  };
  const first = await held(args);
  step('held: ' + first.url);
  const answer = await ask({ type: 'approve', url: first.url, elicitationId: first.elicitationId });
  if (answer.error) throw new Error('browser: ' + answer.error);
  step('approved in the browser');
  const res = await client.callTool({ name: 'send_email', arguments: args });
  if (res.isError) throw new Error('the approved call failed: ' + JSON.stringify(res));
  const retried = res.content[0].text;
  step('retried: ' + retried);
  const second = await held(args);
  const other = await held(otherArgs);
  await client.close();
  report({ client: 'approval-' + sdk, registrations: provider.registrations, first, retried, second, other });
});
