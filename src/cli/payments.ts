import { UsageError, parseCommand } from './args';
import { operate } from './operate';

const HELP = `
Usage: cpd payments refund --payment ID --reason R [--amount A] [--allow-negative] [--idempotency-key K]

Refunds a paid payment through its provider (in sandbox mode at once), as
POST /api/admin/payments/{id}/refund does, and prints {"payment": {...}}. The amount (major units,
at most 6 decimals, whole cents with a live provider; default: what remains unrefunded) is debited
from the account's wallet as an adjustment "Refund of payment <id>"; a refund that would take the
balance below zero needs --allow-negative. Running it again with the same --idempotency-key
refunds once. Audited with the actor "cli".
`;

export async function paymentsCommand(argv: string[]) {
  const [sub, ...rest] = argv;
  if (sub !== 'refund') {
    if (sub === undefined || sub === '--help' || sub === '-h') {
      process.stdout.write(`${HELP.trim()}\n`);
      if (sub === undefined) process.exitCode = 2;
      return;
    }
    throw new UsageError(`unknown payments subcommand "${sub}"\n${HELP}`);
  }
  const { values } = parseCommand(
    rest,
    { payment: { type: 'string' }, amount: { type: 'string' }, reason: { type: 'string' }, 'allow-negative': { type: 'boolean' }, 'idempotency-key': { type: 'string' } },
    HELP,
  );
  if (!values.payment || values.reason === undefined) throw new UsageError(`--payment and --reason are required\n${HELP}`);
  if (values.amount !== undefined && !/^\d+(\.\d+)?$/.test(values.amount)) throw new UsageError(`--amount must be a decimal number such as 12.5\n${HELP}`);
  const body = { amount: values.amount === undefined ? undefined : Number(values.amount), reason: values.reason, allow_negative: values['allow-negative'] ?? false };
  const payment = values.payment;
  return operate('payments refund', ({ admin }) => admin.refundPayment('cli', payment, body, values['idempotency-key']));
}
