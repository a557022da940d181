/**
 * Summarises a V8-format CPU profile (`bun --cpu-prof`, as bench/gateway.ts's PROFILE_DIR writes
 * it) by function: the share of samples in each one (self), or in it and what it called (total);
 * or, with `callers`, the call chains that lead to the functions whose name starts with a prefix.
 * Bun's own markdown profile attributes little to the functions that matter here; the raw samples
 * at a short interval do.
 *
 *   bun bench/support/profile-summary.ts FILE.cpuprofile [self|total] [substring]
 *   bun bench/support/profile-summary.ts FILE.cpuprofile callers 'write ' [depth]
 */
interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}

const [file, mode = 'self', arg = '', depthArg = '4'] = process.argv.slice(2);
if (!file) {
  console.error('usage: bun bench/support/profile-summary.ts FILE.cpuprofile [self|total|callers] [substring|prefix] [depth]');
  process.exit(2);
}
const profile = (await Bun.file(file).json()) as { nodes: ProfileNode[]; samples: number[] };
const nodes = new Map(profile.nodes.map((n) => [n.id, n]));
const parent = new Map<number, number>();
for (const n of profile.nodes) for (const child of n.children ?? []) parent.set(child, n.id);
const nameOf = (id: number) => {
  const { functionName, url, lineNumber } = nodes.get(id)!.callFrame;
  return `${functionName || '(anonymous)'} ${url.replace(/.*\/(src|node_modules)\//, '$1/')}:${lineNumber + 1}`;
};
/** The sample's stack, innermost first. */
function* stackOf(id: number): Generator<number> {
  for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) yield at;
}

const counts = new Map<string, number>();
const add = (key: string) => counts.set(key, (counts.get(key) ?? 0) + 1);
for (const sample of profile.samples) {
  if (mode === 'self') add(nameOf(sample));
  else if (mode === 'total') for (const name of new Set([...stackOf(sample)].map(nameOf))) add(name);
  else if (mode === 'callers' && nameOf(sample).startsWith(arg))
    add([...stackOf(sample)].slice(1, 1 + Number(depthArg)).map(nameOf).join(' < '));
}
const total = profile.samples.length;
console.log(`${total} samples`);
const rows = [...counts].filter(([name]) => mode === 'callers' || name.includes(arg)).sort((a, b) => b[1] - a[1]);
for (const [name, n] of rows.slice(0, 40)) console.log(`${((100 * n) / total).toFixed(1).padStart(5)} %  ${name}`);
