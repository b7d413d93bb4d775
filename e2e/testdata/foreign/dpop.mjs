// oauth4webapi as a DPoP client (RFC 9449) against authserver (with
// dpop.nonce on) and the example MCP server started with --dpop: it
// registers a public client with dpop_bound_access_tokens, authorizes with
// dpop_jkt, gets a DPoP-bound token (answering the AS's use_dpop_nonce
// once), calls a tool with the DPoP scheme, and refreshes with the same key.
// It also tries what must fail and reports each outcome: the bound token
// sent as Bearer, a replayed proof, a proof with a wrong ath or htu, and a
// refresh proved with another key.
import * as oauth from 'oauth4webapi';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { browse, claims, env, report, run, step, toolResult } from './lib.mjs';

const mcpURL = new URL(env('MCP_URL'));
const redirectURI = env('REDIRECT_URI');
const insecure = { [oauth.allowInsecureRequests]: true };
const initialize = JSON.stringify({
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'dpop-probe', version: '1' } },
});
const mcpHeaders = () => new Headers({ 'content-type': 'application/json', accept: 'application/json, text/event-stream' });

let nonceRetries = 0;
// withNonce runs request once more when the server asked for a DPoP nonce
// (RFC 9449 §8): the DPoP handle has cached the DPoP-Nonce it sent.
const withNonce = async (request) => {
  try {
    return await request();
  } catch (err) {
    if (!oauth.isDPoPNonceError(err)) throw err;
    nonceRetries++;
    return request();
  }
};

// refused reports whether request fails with status and error (in the
// body at the AS, in a DPoP challenge at the MCP server).
const refused = async (request, status, error) => {
  try {
    const resp = await request();
    if (resp instanceof Response) return resp.status === status;
    return false;
  } catch (err) {
    if (err instanceof oauth.WWWAuthenticateChallengeError) {
      return err.status === status && err.cause.some((c) => c.scheme === 'dpop' && c.parameters.error === error);
    }
    if (err instanceof oauth.ResponseBodyError) return err.status === status && err.error === error;
    throw err;
  }
};

run(async () => {
  const rs = await oauth.processResourceDiscoveryResponse(mcpURL, await oauth.resourceDiscoveryRequest(mcpURL, insecure));
  const resource = rs.resource;
  const issuer = new URL(rs.authorization_servers[0]);
  const as = await oauth.processDiscoveryResponse(issuer, await oauth.discoveryRequest(issuer, { algorithm: 'oauth2', ...insecure }));
  const client = await oauth.processDynamicClientRegistrationResponse(
    await oauth.dynamicClientRegistrationRequest(
      as,
      {
        client_name: 'mcpauth foreign client: oauth4webapi DPoP',
        redirect_uris: [redirectURI],
        grant_types: ['authorization_code', 'refresh_token'],
        response_types: ['code'],
        token_endpoint_auth_method: 'none',
        scope: 'mcp:tools',
        dpop_bound_access_tokens: true,
      },
      insecure,
    ),
  );
  const clientAuth = oauth.None();
  const keys = await oauth.generateKeyPair('ES256', { extractable: true });
  const dpop = oauth.DPoP(client, keys);
  const jkt = await dpop.calculateThumbprint();
  step('registered ' + client.client_id + ', key ' + jkt);

  const verifier = oauth.generateRandomCodeVerifier();
  const u = new URL(as.authorization_endpoint);
  u.searchParams.set('response_type', 'code');
  u.searchParams.set('client_id', client.client_id);
  u.searchParams.set('redirect_uri', redirectURI);
  u.searchParams.set('scope', 'mcp:tools');
  u.searchParams.set('resource', resource);
  u.searchParams.set('code_challenge', await oauth.calculatePKCECodeChallenge(verifier));
  u.searchParams.set('code_challenge_method', 'S256');
  u.searchParams.set('dpop_jkt', jkt);
  const params = oauth.validateAuthResponse(as, client, await browse(u), oauth.expectNoState);
  const first = await withNonce(async () =>
    oauth.processAuthorizationCodeResponse(
      as,
      client,
      await oauth.authorizationCodeGrantRequest(as, client, clientAuth, params, redirectURI, verifier, {
        DPoP: dpop,
        additionalParameters: { resource },
        ...insecure,
      }),
    ),
  );
  step('token ' + first.token_type);

  // call makes one tool call over MCP, every request with a fresh proof.
  const call = async (at, name) => {
    const fetchFn = (url, init) =>
      oauth.protectedResourceRequest(at, init?.method ?? 'GET', new URL(url), new Headers(init?.headers), init?.body, { DPoP: dpop, ...insecure });
    const mcp = new Client({ name: 'mcpauth-foreign-oauth4webapi-dpop', version: '1.0.0' });
    await mcp.connect(new StreamableHTTPClientTransport(mcpURL, { fetch: fetchFn }));
    try {
      return toolResult(await mcp.callTool({ name, arguments: {} }));
    } finally {
      await mcp.close();
    }
  };
  const whoami = await call(first.access_token, 'whoami');
  step('whoami called with DPoP');

  const at = first.access_token;
  const bearerRefused = await refused(
    () => fetch(mcpURL, { method: 'POST', headers: { ...Object.fromEntries(mcpHeaders()), authorization: 'Bearer ' + at }, body: initialize }),
    401,
  );
  // A proof captured from a request that succeeded, sent again.
  let captured;
  const capture = {
    [oauth.customFetch]: (url, init) => {
      captured = new Headers(init.headers);
      return fetch(url, init);
    },
  };
  const once = await oauth.protectedResourceRequest(at, 'POST', mcpURL, mcpHeaders(), initialize, { DPoP: dpop, ...capture, ...insecure });
  const replayRefused =
    once.status === 200 && (await refused(() => fetch(mcpURL, { method: 'POST', headers: captured, body: initialize }), 401));
  const tampered = (edit) => oauth.DPoP(client, keys, { [oauth.modifyAssertion]: (_, payload) => edit(payload) });
  const wrongAthRefused = await refused(
    () => oauth.protectedResourceRequest(at, 'POST', mcpURL, mcpHeaders(), initialize, { DPoP: tampered((p) => (p.ath = 'A'.repeat(43))), ...insecure }),
    401,
    'invalid_dpop_proof',
  );
  const wrongHtuRefused = await refused(
    () =>
      oauth.protectedResourceRequest(at, 'POST', mcpURL, mcpHeaders(), initialize, {
        DPoP: tampered((p) => (p.htu = mcpURL.origin + '/elsewhere')),
        ...insecure,
      }),
    401,
    'invalid_dpop_proof',
  );
  step('negative checks at the MCP server done');

  // RFC 9449 §5: the refresh token of this public client is bound to the key.
  const otherKey = oauth.DPoP(client, await oauth.generateKeyPair('ES256', { extractable: true }));
  const otherKeyRefreshRefused = await refused(
    () =>
      withNonce(async () =>
        oauth.processRefreshTokenResponse(
          as,
          client,
          await oauth.refreshTokenGrantRequest(as, client, clientAuth, first.refresh_token, { DPoP: otherKey, additionalParameters: { resource }, ...insecure }),
        ),
      ),
    400,
    'invalid_dpop_proof',
  );
  const refreshed = await withNonce(async () =>
    oauth.processRefreshTokenResponse(
      as,
      client,
      await oauth.refreshTokenGrantRequest(as, client, clientAuth, first.refresh_token, { DPoP: dpop, additionalParameters: { resource }, ...insecure }),
    ),
  );
  const refreshedWhoami = await call(refreshed.access_token, 'whoami');
  step('refreshed with the same key');

  report({
    client: 'oauth4webapi-dpop',
    registrations: [client.client_id],
    whoami,
    refreshedWhoami,
    dpop: {
      jkt,
      asAlgs: as.dpop_signing_alg_values_supported ?? [],
      prmAlgs: rs.dpop_signing_alg_values_supported ?? [],
      tokenType: first.token_type,
      cnf: claims(first.access_token).cnf ?? null,
      refreshedTokenType: refreshed.token_type,
      refreshedCnf: claims(refreshed.access_token).cnf ?? null,
      rotated: refreshed.refresh_token !== first.refresh_token,
      nonceRetries,
      bearerRefused,
      replayRefused,
      wrongAthRefused,
      wrongHtuRefused,
      otherKeyRefreshRefused,
    },
  });
});
