/** The SMS provider SMS_PROVIDER names (config-accounts.ts), or null when phone codes are off. */
import type { AppContext } from '../../../app-context';
import { aliyunSender } from './aliyun';
import type { SmsSender } from './sms-sender';
import { tencentSender } from './tencent';

export { SmsError, type SmsSender } from './sms-sender';

export function createSmsSender(ctx: AppContext): SmsSender | null {
  const settings = ctx.config.accounts.sms;
  if (!settings) return null;
  if (settings.provider === 'aliyun') return aliyunSender(settings);
  if (settings.provider === 'tencent') return tencentSender(settings);
  return {
    // SMS_PROVIDER=log (the loopback default): nothing leaves the machine; the developer reads the
    // code here. `sms_code`, not `code`: the logger redacts every `code` field.
    async send(phone, code) {
      ctx.log.warn(
        { sms_provider: 'log', phone, sms_code: code },
        'SMS NOT SENT (SMS_PROVIDER=log): the phone code is in this line, for local use only',
      );
    },
  };
}
