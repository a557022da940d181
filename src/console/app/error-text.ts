/**
 * API errors said for a person in the page's language. The API words its errors in English for
 * curl users ("invalid models[0].price: must be a number", "spend_limit must be zero or more");
 * the console recognises their shapes and says them with its own strings. A message of no known
 * shape is shown as the server wrote it.
 */
import type { Key } from './messages';

type Translate = (key: Key, vars?: Record<string, string | number>) => string;

/** Field names of the API → the console's word for them; others are shown as the API names them. */
const FIELDS: Record<string, Key> = {
  price: 'product.field.price',
  input_price: 'product.field.price',
  output_price: 'product.field.price',
  amount: 'product.field.amount',
  password: 'product.field.password',
  new_password: 'product.field.password',
  email: 'product.field.email',
  name: 'product.field.name',
  spend_limit: 'product.field.limit',
  body: 'product.field.value',
};

/** The problem part of a message ("must be a number") → its string and values. */
const PROBLEMS: Array<[RegExp, (m: RegExpMatchArray) => [Key, Record<string, string>]]> = [
  [/^is required$/, () => ['product.error.required', {}]],
  [/^must be a number(, or null)?$/, () => ['product.error.number', {}]],
  [/^must be a whole number(, or null)?$/, () => ['product.error.integer', {}]],
  [/^must be a string$/, () => ['product.error.string', {}]],
  [/^must be true or false$/, () => ['product.error.boolean', {}]],
  [/^must not be empty$/, () => ['product.error.empty', {}]],
  [/^must be at least (\d+) characters?$/, (m) => ['product.error.minLength', { n: m[1]! }]],
  [/^must be at most (\d+) characters?$/, (m) => ['product.error.maxLength', { n: m[1]! }]],
  [/^must be zero or more(, or null)?$/, () => ['product.error.notNegative', {}]],
  [/^must be (-?[\d.]+) or more(, or null)?$/, (m) => ['product.error.minimum', { n: m[1]! }]],
  [/^must be (-?[\d.]+) or less(, or null)?$/, (m) => ['product.error.maximum', { n: m[1]! }]],
  [/^must be a valid .+$/, () => ['product.error.format', {}]],
  [/^is not in the expected format$/, () => ['product.error.format', {}]],
  [/^must have at most (\w+) decimals\b.*$/, (m) => ['product.error.decimals', { n: m[1] === 'two' ? '2' : m[1]! }]],
];

/** The field's word: the last name in "models[0].price", translated when known. */
function fieldWord(field: string, t: Translate): string {
  const last = field.replace(/\[\d+\]/g, '').split('.').at(-1) ?? field;
  const key = FIELDS[last];
  return key ? t(key) : last;
}

export function humanError(message: string, t: Translate): string {
  if (message === 'request body is not valid JSON') return t('product.error.badJson');
  // "invalid <field>: <problem>" from schema validation, or "<field> <problem>" from a handler.
  const shaped = /^invalid ([^:\s]+): (.+)$/.exec(message) ?? /^([a-z_][\w.[\]]*) ((?:must|is) .+)$/.exec(message);
  if (!shaped) return message;
  const [, field, problem] = shaped as unknown as [string, string, string];
  for (const [pattern, say] of PROBLEMS) {
    const m = problem.match(pattern);
    if (!m) continue;
    const [key, vars] = say(m);
    const text = t(key, { ...vars, field: fieldWord(field, t) });
    // Chinese field words are joined without a space; capitalise the English sentence's first letter.
    return text.charAt(0).toUpperCase() + text.slice(1);
  }
  return message;
}
