/**
 * What POST /v1/router/replay {capture_id, model?} runs: the captured request as received, with
 * `model` replaced when another model or route is asked. A key replays only its owner's captures
 * (another's is 404, as if it did not exist); an admin session any; any other session is refused.
 */
import { AppError } from '../../platform/errors';
import type { Caller } from '../../platform/http/auth';
import type { CapturesService } from '../captures';

export type ReplaySource = Pick<CapturesService, 'replaySource'>;

export async function replayBody(captures: ReplaySource, caller: Caller, asked: Record<string, unknown>) {
  if (caller.via !== 'key' && !caller.isAdmin) throw new AppError('forbidden', "replay needs an API key of the capture's owner or an admin session");
  const id = asked.capture_id;
  if (typeof id !== 'string' || id === '' || id.length > 64) throw new AppError('invalid', 'capture_id is required (a string)');
  const model = asked.model;
  if (model !== undefined && (typeof model !== 'string' || model === '' || model.length > 200)) throw new AppError('invalid', 'model must be a model or route name');
  // An admin's API key sees its owner's captures only, as everywhere admin scope needs a session.
  const source = await captures.replaySource(caller.via === 'key' ? caller.userId : null, id);
  return { source, body: model ? { ...source.body, model } : source.body };
}
