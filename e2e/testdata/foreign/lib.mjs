// Shared by the client scripts: the line protocol with the Go test that
// started them, and a few small readers.
//
// The script writes one JSON object per line on stdout:
//   {"type":"authorize","url":"..."}  open this authorization URL in the "browser";
//                                     the Go test walks the login and consent forms
//                                     and answers one line on stdin:
//                                     {"redirect":"<the URL the AS redirected to>"} or {"error":"..."}
//   {"type":"result", ...}            the facts the Go test checks.
// Anything else (diagnostics) goes to stderr.
import readline from 'node:readline';

const lines = [];
const waiters = [];
const rl = readline.createInterface({ input: process.stdin });
rl.on('line', (line) => {
  const w = waiters.shift();
  if (w) w.resolve(line);
  else lines.push(line);
});
rl.on('close', () => {
  for (const w of waiters.splice(0)) w.reject(new Error('stdin closed'));
});

function nextLine() {
  if (lines.length > 0) return Promise.resolve(lines.shift());
  return new Promise((resolve, reject) => waiters.push({ resolve, reject }));
}

export function send(msg) {
  process.stdout.write(JSON.stringify(msg) + '\n');
}

// browse hands url to the person at the browser and returns the URL the
// authorization server finally redirected the browser to (RFC 6749 §4.1.2).
export async function browse(url) {
  send({ type: 'authorize', url: String(url) });
  const msg = JSON.parse(await nextLine());
  if (msg.error) throw new Error('browser: ' + msg.error);
  return new URL(msg.redirect);
}

// ask sends msg to the Go test and returns its answer, one JSON line.
export async function ask(msg) {
  send(msg);
  return JSON.parse(await nextLine());
}

const started = Date.now();

// step notes progress on stderr, which the Go test shows when it fails.
export function step(what) {
  console.error(`[${((Date.now() - started) / 1000).toFixed(2)}s] ${what}`);
}

export function report(facts) {
  send({ type: 'result', ...facts });
  rl.close();
}

export function env(name) {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set`);
  return v;
}

// claims decodes a JWS payload without verifying it (the servers verified it;
// the oauth4webapi script verifies it itself).
export function claims(jwt) {
  const parts = String(jwt).split('.');
  if (parts.length !== 3) throw new Error('access token is not a JWS compact serialization');
  return JSON.parse(Buffer.from(parts[1], 'base64url').toString('utf8'));
}

// toolResult is the structured result of a tools/call, failing on a tool error.
export function toolResult(res) {
  if (res.isError) throw new Error('tool error: ' + JSON.stringify(res.content));
  if (res.structuredContent) return res.structuredContent;
  return JSON.parse(res.content[0].text);
}

// run calls main and turns a failure into a non-zero exit with the error on stderr.
export function run(main) {
  main().then(
    () => process.exit(0),
    (err) => {
      console.error(err && err.stack ? err.stack : String(err));
      if (err && err.cause) console.error('cause:', err.cause);
      process.exit(1);
    },
  );
}

// expectUnauthorized connects client over transport without a token and
// expects the SDK's UnauthorizedError (1.x and v2 each export their own):
// the 401, discovery, registration and the authorization URL handed to
// provider.redirectToAuthorization come first.
export async function expectUnauthorized(client, transport, UnauthorizedError) {
  try {
    await client.connect(transport);
  } catch (err) {
    if (!(err instanceof UnauthorizedError)) throw err;
    return;
  }
  throw new Error('connected without authorization');
}

// refreshAndReport ends an SDK client's run once admin_stats has been
// called with the stepped-up token: the access token stops working (as
// when it expires), the next call gets 401 invalid_token and the SDK
// redeems the refresh token; then the facts go to the Go test.
export async function refreshAndReport(name, provider, client, facts) {
  const stepped = provider.tokens();
  step('admin_stats called');
  provider._tokens = { ...stepped, access_token: 'no-longer-valid' };
  const refreshedWhoami = toolResult(await client.callTool({ name: 'whoami', arguments: {} }));
  step('called after the refresh');
  const refreshed = provider.tokens();
  await client.close();
  report({
    client: name,
    registrations: provider.registrations,
    ...facts,
    refreshedWhoami,
    steppedAccessToken: stepped.access_token,
    steppedRefreshToken: stepped.refresh_token,
    refreshedAccessToken: refreshed.access_token,
    refreshedRefreshToken: refreshed.refresh_token,
    scopes: provider.issued.map((t) => t.scope),
    jtis: provider.issued.map((t) => claims(t.access_token).jti),
  });
}

// MemoryProvider is an OAuthClientProvider (the same shape in SDK 1.x and
// v2) that keeps everything in memory and, on purpose, has no state()
// method: the SDK then sends no state parameter, as its own example client
// does. PKCE protects the flow (OAuth 2.1 §4.1.1).
export class MemoryProvider {
  constructor(redirectUrl, clientName) {
    this._redirectUrl = redirectUrl;
    this._clientName = clientName;
    this._client = undefined;
    this._tokens = undefined;
    this._verifier = undefined;
    this.registrations = []; // client_ids obtained by DCR, in order
    this.issued = []; // every token response saved, in order
    this.pending = undefined; // the authorization URL to open
  }
  get redirectUrl() {
    return this._redirectUrl;
  }
  get clientMetadata() {
    return {
      client_name: this._clientName,
      redirect_uris: [this._redirectUrl],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
    };
  }
  clientInformation() {
    return this._client;
  }
  saveClientInformation(info) {
    if (!this._client || this._client.client_id !== info.client_id) this.registrations.push(info.client_id);
    this._client = info;
  }
  tokens() {
    return this._tokens;
  }
  saveTokens(tokens) {
    this._tokens = tokens;
    this.issued.push(tokens);
  }
  redirectToAuthorization(url) {
    this.pending = new URL(String(url));
  }
  saveCodeVerifier(v) {
    this._verifier = v;
  }
  codeVerifier() {
    if (!this._verifier) throw new Error('no code verifier saved');
    return this._verifier;
  }
  invalidateCredentials(scope) {
    if (scope === 'all' || scope === 'client') this._client = undefined;
    if (scope === 'all' || scope === 'tokens') this._tokens = undefined;
    if (scope === 'all' || scope === 'verifier') this._verifier = undefined;
  }
  // takePending returns the authorization URL the SDK asked to open, once.
  takePending() {
    const u = this.pending;
    this.pending = undefined;
    if (!u) throw new Error('the SDK did not ask to open an authorization URL');
    return u;
  }
}
