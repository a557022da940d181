import { UsageError, parseCommand } from './args';
import { operate } from './operate';

const HELP = `
Usage: cpd wallet adjust (--user ID|EMAIL|PHONE | --org ORG_ID) --amount A --reason R [--allow-negative] [--idempotency-key K]

Records a signed adjustment on the account's wallet, or with --org on the organization's (major
units, at most 6 decimals, not zero; a reason of 1 to 500 characters), as
POST /api/admin/users/{id}/adjustments (or /api/admin/orgs/{id}/adjustments) does, and prints
{"transaction": {...}}. A debit that would take the balance below zero needs --allow-negative.
Running it again with the same --idempotency-key applies it once. Audited with the actor "cli".
Write a debit with an equals sign, --amount=-2.5, so it is not read as an option.
`;

export async function walletCommand(argv: string[]) {
  const [sub, ...rest] = argv;
  if (sub !== 'adjust') {
    if (sub === undefined || sub === '--help' || sub === '-h') {
      process.stdout.write(`${HELP.trim()}\n`);
      if (sub === undefined) process.exitCode = 2;
      return;
    }
    throw new UsageError(`unknown wallet subcommand "${sub}"\n${HELP}`);
  }
  const { values } = parseCommand(
    rest,
    { user: { type: 'string' }, org: { type: 'string' }, amount: { type: 'string' }, reason: { type: 'string' }, 'allow-negative': { type: 'boolean' }, 'idempotency-key': { type: 'string' } },
    HELP,
  );
  if (!values.user === !values.org) throw new UsageError(`name one wallet: --user or --org\n${HELP}`);
  if (values.amount === undefined || values.reason === undefined) throw new UsageError(`--amount and --reason are required\n${HELP}`);
  if (!/^-?\d+(\.\d+)?$/.test(values.amount)) throw new UsageError(`--amount must be a decimal number such as 12.5 or -0.25\n${HELP}`);
  const amount = Number(values.amount);
  const { user, org } = values;
  const body = { amount, reason: values.reason, allow_negative: values['allow-negative'] ?? false };
  const key = values['idempotency-key'];
  return operate('wallet adjust', async ({ admin, accounts }) =>
    org ? admin.adjustOrg('cli', org, body, key) : admin.adjust('cli', (await accounts.requireUserRef(user!)).id, body, key),
  );
}
