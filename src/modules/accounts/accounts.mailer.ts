/**
 * Outgoing mail: SMTP through nodemailer (SMTP_URL smtp:// upgrades with STARTTLS when the server
 * offers it, smtps:// is TLS from the first byte), or the `log:` transport, which writes each
 * message to the log (a developer on a loopback PUBLIC_URL clicks the link from there).
 *
 * Mail never holds up or fails the request that caused it: callers hand a message to `deliver`
 * after their transaction committed, and it is sent in the background. A failure is logged
 * (which mail, to which account, the server's words) and the request's answer stands: a user who
 * got no link asks again. At shutdown the sends in flight get DRAIN_DEADLINE_MS to finish.
 */
import nodemailer from 'nodemailer';
import type { AppContext } from '../../app-context';
import type { MailSettings } from '../../config-accounts';
import { DRAIN_DEADLINE_MS } from '../../platform/context';
import { randomBytes } from '../../platform/crypto';

export interface MailMessage {
  to: string;
  subject: string;
  text: string;
  html: string;
  /** What it is (verify_email, reset_password, …) and for whom, for the log line. */
  kind: string;
  userId: string;
}

export interface Mailer {
  /** False when no mail is configured: features that need it are off. */
  enabled: boolean;
  /** Sends in the background; never throws. */
  deliver(message: MailMessage): void;
  /**
   * Runs `work` (reads, writes, deliver) after the caller has answered, tracked like a send: for
   * work whose duration must not tell the requester anything. A failure is logged under `kind`.
   */
  later(kind: string, work: () => Promise<void>): void;
}

/** The host part of MAIL_FROM, for Message-ID (`cpd <noreply@example.com>` → example.com). */
const fromDomain = (from: string) => /@([^>\s]+)>?\s*$/.exec(from)?.[1] ?? 'localhost';

export function createMailer(ctx: AppContext): Mailer {
  const { log } = ctx;
  const settings = ctx.config.accounts.mail;
  const inFlight = new Set<Promise<void>>();
  // nodemailer reads the URL itself (user, password, port, `?tls.rejectUnauthorized=false` …);
  // the URL holds the password, so it is never logged, nor the transport's options.
  const transport = settings?.kind === 'smtp' ? nodemailer.createTransport(settings.url) : null;
  if (transport) ctx.onShutdown(() => transport.close());

  async function send(settings: MailSettings, m: MailMessage): Promise<void> {
    const messageId = `<${randomBytes(16).toString('hex')}@${fromDomain(settings.from)}>`;
    if (!transport) {
      // The log transport: the message is the point (its link is how a developer signs up), so it is logged whole.
      log.info({ mail: { kind: m.kind, user_id: m.userId, from: settings.from, to: m.to, subject: m.subject, message_id: messageId, text: m.text } }, 'mail (log transport)');
      return;
    }
    try {
      await transport.sendMail({ from: settings.from, to: m.to, subject: m.subject, text: m.text, html: m.html, date: ctx.clock.now(), messageId });
      log.info({ mail: { kind: m.kind, user_id: m.userId, message_id: messageId } }, 'mail sent');
    } catch (err) {
      // The error is the server's answer or the connection's failure; safeError keeps its message, never the URL.
      log.warn({ err, mail: { kind: m.kind, user_id: m.userId } }, 'mail not sent');
    }
  }

  /** Every send started so far, finished. */
  const idle = async () => {
    while (inFlight.size) await Promise.allSettled([...inFlight]);
  };
  ctx.onShutdown(async () => {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const deadline = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, DRAIN_DEADLINE_MS);
    });
    await Promise.race([idle(), deadline]);
    clearTimeout(timer);
  });

  function track(kind: string, userId: string | null, work: Promise<void>) {
    const tracked = work.catch((err) => log.error({ err, mail: { kind, user_id: userId } }, 'mail failed')).finally(() => inFlight.delete(tracked));
    inFlight.add(tracked);
  }

  return {
    enabled: settings !== null,
    deliver(message) {
      if (settings) track(message.kind, message.userId, send(settings, message));
    },
    later(kind, work) {
      if (settings) track(kind, null, Promise.resolve().then(work));
    },
  };
}
