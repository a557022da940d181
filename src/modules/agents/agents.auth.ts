/**
 * Agent API auth, a macro of its own because its rules differ
 * from the main API's: `Authorization: Bearer <k>` or `ApiKey <k>`, where k is
 *   - a `bfvk-` key of this site: the key's owner is the workspace and is billed;
 *   - AGENT_CLOUD_API_KEY (compared in constant time): the shared workspace, unbilled.
 * With AGENT_CLOUD_API_KEY unset, no credential is needed (shared workspace); a bfvk- key that is
 * presented must still be valid, so a revoked key is refused at once.
 */
import { Elysia } from 'elysia';
import { safeEqual } from '../../platform/crypto';
import { AppError } from '../../platform/errors';
import { API_KEY_PREFIX, type CallerResolver } from '../../platform/http/auth';
import type { Principal } from './agents.service';

function presentedKey(request: Request): string | null {
  const header = request.headers.get('authorization');
  const m = header ? /^(?:Bearer|ApiKey)\s+(\S+)\s*$/i.exec(header) : null;
  return m ? m[1]! : null;
}

export async function principalOf(request: Request, cloudKey: string | null, resolver: CallerResolver): Promise<Principal> {
  const key = presentedKey(request);
  if (key?.startsWith(API_KEY_PREFIX)) {
    const caller = await resolver.callerForKey(key);
    if (!caller) throw new AppError('unauthorized', 'invalid API key');
    return { ownerId: caller.userId, caller: { userId: caller.userId, keyId: caller.keyId } };
  }
  if (cloudKey !== null && (key === null || !safeEqual(key, cloudKey))) throw new AppError('unauthorized', 'missing or invalid API key');
  return { ownerId: null, caller: null };
}

export const agentAuthPlugin = (cloudKey: string | null, resolver: CallerResolver) => {
  // Checked in `transform`, which runs before body validation, so a request without a valid key
  // is 401 whatever its body; `resolve` (after validation) hands the result to the handler.
  const principals = new WeakMap<Request, Principal>();
  return new Elysia({ name: 'cpd/agents-auth' }).macro({
    agentAuth: (_on: true) => ({
      async transform({ request }) {
        principals.set(request, await principalOf(request, cloudKey, resolver));
      },
      resolve: ({ request }) => ({ principal: principals.get(request)! }),
    }),
  });
};
