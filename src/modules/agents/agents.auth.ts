/**
 * Agent API auth, a macro of its own because its rules differ
 * from the main API's: `Authorization: Bearer <k>` or `ApiKey <k>`, where k is
 *   - a `bfvk-` key of this site: the key's owner is the workspace and is billed;
 *   - AGENT_CLOUD_API_KEY (compared in constant time): the operator's shared workspace, unbilled.
 * With AGENT_CLOUD_API_KEY unset, no credential is needed (open mode): an anonymous caller gets a
 * workspace of its client address, so anonymous callers never see each other's agents and
 * sessions, and is rate limited per address (named limit `agents_anonymous`). A bfvk- key that is
 * presented must still be valid, so a revoked key is refused at once.
 */
import type { Server } from 'bun';
import { Elysia } from 'elysia';
import { safeEqual } from '../../platform/crypto';
import { AppError } from '../../platform/errors';
import { API_KEY_PREFIX, type CallerResolver } from '../../platform/http/auth';
import { clientAddress } from '../../platform/http/client-address';
import { admit, CREDENTIALS_DETAIL, passOf } from '../../platform/http/credential-gate';
import type { TokenBucketLimiter } from '../../platform/http/rate-limit';
import type { Principal } from './agents.service';

function presentedKey(request: Request): string | null {
  const header = request.headers.get('authorization');
  const m = header ? /^(?:Bearer|ApiKey)\s+(\S+)\s*$/i.exec(header) : null;
  return m ? m[1]! : null;
}

/** The workspace of anonymous callers from one address (never a user id: those start `usr_`). */
const anonymousWorkspace = (address: string | null) => `anonymous:${address ?? 'unknown'}`;

export interface AgentAuthDeps {
  cloudKey: string | null;
  resolver: CallerResolver;
  /** Per client address, for anonymous callers in open mode. */
  anonymousLimiter: TokenBucketLimiter;
  trustProxy: boolean;
}

async function principalOf(request: Request, address: string | null, deps: AgentAuthDeps): Promise<Principal> {
  const key = presentedKey(request);
  if (key?.startsWith(API_KEY_PREFIX)) {
    const caller = await deps.resolver.callerForKey(key);
    if (!caller) throw new AppError('unauthorized', 'invalid API key');
    return { ownerId: caller.userId, caller: { userId: caller.userId, keyId: caller.keyId } };
  }
  if (deps.cloudKey !== null) {
    if (key === null || !safeEqual(key, deps.cloudKey)) throw new AppError('unauthorized', 'missing or invalid API key');
    return { ownerId: null, caller: null };
  }
  deps.anonymousLimiter.enforce(address ?? 'unknown', 1, 'too many anonymous agent requests from this address; try again later or use an API key');
  return { ownerId: anonymousWorkspace(address), caller: null };
}

/** The principal of a request to the agent API: what the credential gate (platform/http/credential-gate.ts) runs for its routes, before the body. */
export const agentPrincipal = (request: Request, server: Pick<Server<unknown>, 'requestIP'> | null, deps: AgentAuthDeps): Promise<Principal> =>
  principalOf(request, clientAddress(request, server, deps.trustProxy), deps);

export const agentAuthPlugin = (deps: AgentAuthDeps) =>
  new Elysia({ name: 'cpd/agents-auth' }).macro({
    agentAuth: (_on: true) => ({
      // Checked by the credential gate before the body is read (a request without a valid key is
      // 401 whatever its body); here only for a request the gate did not place.
      async transform({ request, server }) {
        await admit(request, () => agentPrincipal(request, server, deps));
      },
      resolve: ({ request }) => ({ principal: passOf<Principal>(request) }),
      // Read by the credential gate and shown in the OpenAPI document.
      detail: { [CREDENTIALS_DETAIL]: ['agent'], security: [{ bearer: [] }] } as Record<string, unknown>,
    }),
  });
