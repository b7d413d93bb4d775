// oauth4webapi, in its strict defaults, against authserver and the example
// MCP server: RFC 9728 and RFC 8414 discovery, RFC 7591 registration, an
// authorization code flow with PKCE and no state (expectNoState: a state in
// the response is an error) whose response must carry the RFC 9207 iss,
// RFC 9068 validation of every access token with the AS's JWKS, a tool call,
// step-up to mcp:admin for the same client, and a refresh.
import * as oauth from 'oauth4webapi';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { browse, env, report, run, step, toolResult } from './lib.mjs';

const mcpURL = new URL(env('MCP_URL'));
const redirectURI = env('REDIRECT_URI');
// Plain http is allowed for the loopback test servers only; every other check
// stays at its default.
const insecure = { [oauth.allowInsecureRequests]: true };

run(async () => {
  // RFC 9728: the resource's metadata names its authorization server.
  const rs = await oauth.processResourceDiscoveryResponse(mcpURL, await oauth.resourceDiscoveryRequest(mcpURL, insecure));
  const resource = rs.resource;
  const issuer = new URL(rs.authorization_servers[0]);
  const as = await oauth.processDiscoveryResponse(issuer, await oauth.discoveryRequest(issuer, { algorithm: 'oauth2', ...insecure }));
  if (as.authorization_response_iss_parameter_supported !== true) throw new Error('AS metadata does not announce RFC 9207 iss');

  // RFC 7591 registration, as a public client for the first scope only.
  const client = await oauth.processDynamicClientRegistrationResponse(
    await oauth.dynamicClientRegistrationRequest(
      as,
      {
        client_name: 'mcpauth foreign client: oauth4webapi',
        redirect_uris: [redirectURI],
        grant_types: ['authorization_code', 'refresh_token'],
        response_types: ['code'],
        token_endpoint_auth_method: 'none',
        scope: 'mcp:tools',
      },
      insecure,
    ),
  );
  const clientAuth = oauth.None();
  let issRejected = false;

  // authorize runs one authorization code flow for scope and returns the
  // validated token response.
  const authorize = async (scope) => {
    const verifier = oauth.generateRandomCodeVerifier();
    const u = new URL(as.authorization_endpoint);
    u.searchParams.set('response_type', 'code');
    u.searchParams.set('client_id', client.client_id);
    u.searchParams.set('redirect_uri', redirectURI);
    u.searchParams.set('scope', scope);
    u.searchParams.set('resource', resource);
    u.searchParams.set('code_challenge', await oauth.calculatePKCECodeChallenge(verifier));
    u.searchParams.set('code_challenge_method', 'S256');
    const cb = await browse(u);
    // The same response with a normalised iss must fail (RFC 9207 §2.4:
    // simple string comparison), so the check below is known to run.
    const forged = new URL(cb);
    forged.searchParams.set('iss', as.issuer + '/');
    try {
      oauth.validateAuthResponse(as, client, forged, oauth.expectNoState);
    } catch {
      issRejected = true;
    }
    const params = oauth.validateAuthResponse(as, client, cb, oauth.expectNoState);
    const resp = await oauth.authorizationCodeGrantRequest(as, client, clientAuth, params, redirectURI, verifier, {
      additionalParameters: { resource },
      ...insecure,
    });
    return oauth.processAuthorizationCodeResponse(as, client, resp);
  };
  // verify is RFC 9068 validation of an access token for this resource.
  const verify = (at, audience = resource) =>
    oauth.validateJwtAccessToken(as, new Request(mcpURL, { headers: { authorization: 'Bearer ' + at } }), audience, insecure);
  // call makes one tool call over MCP with the access token at.
  const call = async (at, name) => {
    const fetchFn = async (url, init) => {
      const headers = new Headers(init?.headers);
      headers.set('authorization', 'Bearer ' + at);
      return fetch(url, { ...init, headers });
    };
    const mcp = new Client({ name: 'mcpauth-foreign-oauth4webapi', version: '1.0.0' });
    await mcp.connect(new StreamableHTTPClientTransport(mcpURL, { fetch: fetchFn }));
    try {
      return toolResult(await mcp.callTool({ name, arguments: {} }));
    } finally {
      await mcp.close();
    }
  };

  step('registered ' + client.client_id);
  const first = await authorize('mcp:tools');
  const firstClaims = await verify(first.access_token);
  let wrongAudienceRejected = false;
  try {
    await verify(first.access_token, resource + '-elsewhere');
  } catch {
    wrongAudienceRejected = true;
  }
  step('first token verified');
  const whoami = await call(first.access_token, 'whoami');

  step('whoami called');
  // Step-up: a tools/call of admin_stats with this token gets a 403 whose
  // RFC 6750 challenge names the scopes the call needs (oauth4webapi parses
  // it); re-authorize the same client for the union.
  let challengeScope;
  try {
    await oauth.protectedResourceRequest(
      first.access_token,
      'POST',
      mcpURL,
      new Headers({ 'content-type': 'application/json', accept: 'application/json, text/event-stream' }),
      JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'admin_stats', arguments: {} } }),
      insecure,
    );
    throw new Error('admin_stats was not refused for a token lacking mcp:admin');
  } catch (err) {
    if (!(err instanceof oauth.WWWAuthenticateChallengeError) || err.status !== 403) throw err;
    const ch = err.cause.find((c) => c.scheme === 'bearer');
    if (ch?.parameters.error !== 'insufficient_scope') throw new Error('403 without insufficient_scope');
    challengeScope = ch.parameters.scope;
  }
  const union = [...new Set([...(first.scope ?? 'mcp:tools').split(' '), ...challengeScope.split(' ')])].join(' ');
  step('403 names ' + challengeScope);
  const stepped = await authorize(union);
  if (!stepped.scope?.split(' ').includes('mcp:admin')) throw new Error(`step-up for ${union} was granted ${stepped.scope}`);
  const steppedClaims = await verify(stepped.access_token);
  step('step-up token verified, scope ' + stepped.scope);
  const admin = await call(stepped.access_token, 'admin_stats');

  step('admin_stats called');
  // Refresh (RFC 6749 §6), then the new token is validated and used.
  if (!stepped.refresh_token) throw new Error('no refresh token issued');
  const refreshed = await oauth.processRefreshTokenResponse(
    as,
    client,
    await oauth.refreshTokenGrantRequest(as, client, clientAuth, stepped.refresh_token, {
      additionalParameters: { resource },
      ...insecure,
    }),
  );
  const refreshedClaims = await verify(refreshed.access_token);
  step('refreshed token verified');
  const refreshedWhoami = await call(refreshed.access_token, 'whoami');

  report({
    client: 'oauth4webapi',
    registrations: [client.client_id],
    whoami,
    admin,
    refreshedWhoami,
    stepUp: 'application',
    challengeScope,
    issRejected,
    wrongAudienceRejected,
    steppedAccessToken: stepped.access_token,
    steppedRefreshToken: stepped.refresh_token,
    refreshedAccessToken: refreshed.access_token,
    refreshedRefreshToken: refreshed.refresh_token,
    scopes: [first.scope, stepped.scope, refreshed.scope],
    jtis: [firstClaims.jti, steppedClaims.jti, refreshedClaims.jti],
    clientIDs: [firstClaims.client_id, steppedClaims.client_id, refreshedClaims.client_id],
  });
});
