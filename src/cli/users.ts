import { UsageError, parseCommand } from './args';
import { operate } from './operate';

const HELP = `
Usage:
  cpd users create   --email E --password P [--phone N] [--admin]
  cpd users list     [--q TEXT] [--limit N] [--cursor C]
  cpd users disable  --user ID|EMAIL|PHONE
  cpd users enable   --user ID|EMAIL|PHONE
  cpd users promote  --user ID|EMAIL|PHONE
  cpd users demote   --user ID|EMAIL|PHONE
  cpd users password --user ID|EMAIL|PHONE --password P

Manages accounts in this site's database (same environment as \`cpd serve\`) and prints JSON:
create prints {"id", "email"}; list prints {"users": [...], "next_cursor"}; the others print the
account as GET /api/admin/users/{id} shows it (password prints nothing). disable ends the account's
sessions and refuses its API keys on every running replica at once. Every change but create is
written to the audit log with the actor "cli". Exits 1 when the request is refused.

Give it the server's environment: --env-file /etc/cpd/<site>.env (the systemd layout), or
DATA_DIR / DATABASE_URL as \`cpd serve\` has them. It never creates a database: with none where
the environment points, or one without cpd's tables, it stops with one line (exit 2). On the
embedded database stop \`cpd serve\` first (systemctl stop cpd@<site>); with DATABASE_URL it runs
beside the server.
`;

const options = {
  email: { type: 'string' },
  password: { type: 'string' },
  phone: { type: 'string' },
  admin: { type: 'boolean' },
  user: { type: 'string' },
  q: { type: 'string' },
  limit: { type: 'string' },
  cursor: { type: 'string' },
} as const;

export async function usersCommand(argv: string[]) {
  const [sub, ...rest] = argv;
  if (sub === undefined || sub === '--help' || sub === '-h') {
    process.stdout.write(`${HELP.trim()}\n`);
    if (sub === undefined) process.exitCode = 2;
    return;
  }
  const { values } = parseCommand(rest, options, HELP);
  const needUser = () => {
    if (!values.user) throw new UsageError(`--user is required\n${HELP}`);
    return values.user;
  };
  const flags: Record<string, { disabled?: boolean; is_admin?: boolean }> = {
    disable: { disabled: true },
    enable: { disabled: false },
    promote: { is_admin: true },
    demote: { is_admin: false },
  };

  if (sub === 'create') {
    if (!values.email || !values.password) throw new UsageError(`--email and --password are required\n${HELP}`);
    // The operator vouches for the address: EMAIL_VERIFICATION=required does not hold this account back.
    const input = { email: values.email, password: values.password, phone: values.phone ?? null, isAdmin: values.admin ?? false, emailVerified: true };
    return operate('users create', async ({ accounts }) => {
      const user = await accounts.createUser(input);
      return { id: user.id, email: user.email };
    });
  }
  if (sub === 'list') {
    const limit = values.limit === undefined ? 50 : Number(values.limit);
    if (!Number.isInteger(limit) || limit < 1 || limit > 200) throw new UsageError(`--limit must be an integer from 1 to 200\n${HELP}`);
    return operate('users list', ({ admin }) => admin.listUsers({ q: values.q, limit, cursor: values.cursor }));
  }
  if (sub in flags) {
    const ref = needUser();
    return operate(`users ${sub}`, async ({ admin, accounts }) => admin.updateUser('cli', (await accounts.requireUserRef(ref)).id, flags[sub]!));
  }
  if (sub === 'password') {
    const ref = needUser();
    if (!values.password) throw new UsageError(`--password is required\n${HELP}`);
    const password = values.password;
    return operate('users password', async ({ admin, accounts }) => {
      await admin.setPassword('cli', (await accounts.requireUserRef(ref)).id, password);
    });
  }
  throw new UsageError(`unknown users subcommand "${sub}"\n${HELP}`);
}
