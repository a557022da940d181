/** What every SMS provider offers the phone codes: send one code to one number, or throw SmsError. */

export interface SmsSender {
  /** `phone` in E.164 (+8613800000000); `code` the 6 digits the template shows. */
  send(phone: string, code: string): Promise<void>;
}

/**
 * A send that did not happen. `refused`: the provider answered with an error (a bad signature, a
 * template it does not know, its own rate limit); `unreachable`: no answer. The message names the
 * provider's error code and text, never a credential, so it may be logged.
 */
export class SmsError extends Error {
  constructor(
    readonly reason: 'refused' | 'unreachable',
    message: string,
  ) {
    super(message);
  }
}
