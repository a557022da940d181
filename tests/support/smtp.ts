/**
 * A real SMTP server in the test process (the `smtp-server` package) that keeps what arrives,
 * parsed by `mailparser`: the outside party of mail, speaking the real protocol.
 *
 *   const smtp = await startSmtp({ auth: { user: 'cpd', pass: 's3cret' } });
 *   env.SMTP_URL = smtp.url;                       // smtp://cpd:s3cret@127.0.0.1:PORT?tls.rejectUnauthorized=false
 *   const mail = await smtp.next((m) => m.to === 'a@b.example');
 *
 * `secure: true` is SMTPS (TLS from the first byte); otherwise plain SMTP offering STARTTLS
 * (`startTls: false` hides it). The server's certificate is smtp-server's own self-signed one, so
 * the URL tells nodemailer not to check it.
 */
import { type ParsedMail, simpleParser } from 'mailparser';
import { SMTPServer } from 'smtp-server';
import { waitFor } from './wait';

export interface ReceivedMail {
  /** The envelope's first recipient. */
  to: string;
  from: string;
  subject: string;
  text: string;
  html: string;
  headers: ParsedMail['headers'];
  /** Whether the session that carried it was encrypted (SMTPS or after STARTTLS). */
  secure: boolean;
  /** The user the client authenticated as, if any. */
  user: string | null;
}

export interface SmtpOptions {
  secure?: boolean;
  startTls?: boolean;
  auth?: { user: string; pass: string };
}

export async function startSmtp(opts: SmtpOptions = {}) {
  const mails: ReceivedMail[] = [];
  const failedLogins: string[] = [];
  const server = new SMTPServer({
    secure: opts.secure ?? false,
    hideSTARTTLS: opts.startTls === false,
    authOptional: !opts.auth,
    disabledCommands: opts.auth ? [] : ['AUTH'],
    // AUTH over a plain connection is what a misconfigured client would do; the tests use TLS or no AUTH.
    allowInsecureAuth: false,
    logger: false,
    onAuth(auth, _session, done) {
      if (opts.auth && auth.username === opts.auth.user && auth.password === opts.auth.pass) return done(null, { user: auth.username });
      failedLogins.push(auth.username ?? '');
      done(new Error('Invalid username or password'));
    },
    onData(stream, session, done) {
      simpleParser(stream)
        .then((parsed) => {
          mails.push({
            to: session.envelope.rcptTo[0]?.address ?? '',
            from: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
            subject: parsed.subject ?? '',
            text: parsed.text ?? '',
            html: typeof parsed.html === 'string' ? parsed.html : '',
            headers: parsed.headers,
            secure: session.secure,
            user: typeof session.user === 'string' ? session.user : null,
          });
          done();
        })
        .catch(done);
    },
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const port = (server.server.address() as { port: number }).port;
  const credentials = opts.auth ? `${encodeURIComponent(opts.auth.user)}:${encodeURIComponent(opts.auth.pass)}@` : '';
  const scheme = opts.secure ? 'smtps' : 'smtp';
  const taken = new Set<ReceivedMail>();

  return {
    port,
    url: `${scheme}://${credentials}127.0.0.1:${port}?tls.rejectUnauthorized=false`,
    mails,
    failedLogins,
    /** The first mail not returned by an earlier next() that matches, waiting for it. */
    async next(match: (m: ReceivedMail) => boolean = () => true, what = 'a mail'): Promise<ReceivedMail> {
      const found = (await waitFor(() => mails.find((m) => !taken.has(m) && match(m)), what))!;
      taken.add(found);
      return found;
    },
    /** Mails to `address` so far. */
    to: (address: string) => mails.filter((m) => m.to === address),
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

export type SmtpServer = Awaited<ReturnType<typeof startSmtp>>;

/** The link in a mail's text that starts with `prefix` (the app's PUBLIC_URL and a path). */
export function linkIn(mail: ReceivedMail, prefix: string): string {
  const link = mail.text.split(/\s+/).find((word) => word.startsWith(prefix));
  if (!link) throw new Error(`no ${prefix} link in: ${mail.text}`);
  return link;
}

/** The `token` query parameter of a mailed link. */
export const tokenOf = (link: string) => new URL(link).searchParams.get('token')!;
