import { loadConfig } from '../config';
import { createAccountsService } from '../modules/accounts';
import { AppError } from '../platform/errors';
import { parseCommand, UsageError } from './args';
import { migrateForCommand, openForCommand, requireExistingSchema } from './database';

const HELP = `
Usage: cpd users create --email E --password P [--phone N] [--admin] [--env-file FILE]

Creates an account in the served site's database and prints {"id": …, "email": …}. Give it the
server's environment: --env-file /etc/cpd/<site>.env (the systemd layout), or DATA_DIR /
DATABASE_URL as \`cpd serve\` has them. It never creates a database: with none where the
environment points it stops (exit 2). On the embedded database, stop \`cpd serve\` first
(systemctl stop cpd@<site>); with DATABASE_URL it runs beside the server.
Exits 1 when the email or phone is taken.
`;

export async function usersCommand(argv: string[]) {
  const [sub, ...rest] = argv;
  if (sub !== 'create') {
    if (sub === '--help' || sub === '-h' || sub === undefined) {
      process.stdout.write(`${HELP.trim()}\n`);
      if (sub === undefined) process.exitCode = 2;
      return;
    }
    throw new UsageError(`unknown users subcommand "${sub}"\n${HELP}`);
  }
  const { values } = parseCommand(rest, { email: { type: 'string' }, password: { type: 'string' }, phone: { type: 'string' }, admin: { type: 'boolean' } }, HELP);
  if (!values.email || !values.password) throw new UsageError(`--email and --password are required\n${HELP}`);
  const ctx = await openForCommand(loadConfig(), { existing: true });
  try {
    await requireExistingSchema(ctx);
    await migrateForCommand(ctx);
    const user = await createAccountsService(ctx).createUser({ email: values.email, password: values.password, phone: values.phone ?? null, isAdmin: values.admin ?? false });
    console.log(JSON.stringify({ id: user.id, email: user.email }));
  } catch (err) {
    if (err instanceof AppError) {
      console.error(`cpd users create: ${err.message}`);
      process.exitCode = 1;
      return;
    }
    throw err;
  } finally {
    await ctx.shutdown();
  }
}
