import { loadConfig } from '../config';
import { createAccountsService } from '../modules/accounts';
import { createContext } from '../platform/context-factory';
import { migrate } from '../platform/db';
import { AppError } from '../platform/errors';
import { parseCommand, UsageError } from './args';

const HELP = `
Usage: cpd users create --email E --password P [--phone N] [--admin]

Creates an account in this site's database (same environment as \`cpd serve\`) and prints
{"id": …, "email": …}. Exits 1 when the email or phone is taken.
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
  const ctx = await createContext(loadConfig());
  try {
    await migrate(ctx.database, { site: ctx.config.site });
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
