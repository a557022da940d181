import changelogText from '../../../CHANGELOG.md' with { type: 'text' };

export interface ChangelogEntry {
  version: string;
  date: string | null;
  changes: string[];
}

/** Parses "## [version] - date" sections and their "- " bullets (continuation lines joined). */
export function parseChangelog(text: string): ChangelogEntry[] {
  const entries: ChangelogEntry[] = [];
  let current: ChangelogEntry | null = null;
  for (const line of text.split('\n')) {
    const heading = /^##\s+\[?([^\]\s]+)\]?(?:\s+-\s+(\d{4}-\d{2}-\d{2}))?/.exec(line);
    if (heading) {
      current = { version: heading[1]!, date: heading[2] ?? null, changes: [] };
      entries.push(current);
    } else if (current && /^[-*]\s+/.test(line)) {
      current.changes.push(line.replace(/^[-*]\s+/, '').trim());
    } else if (current && /^\s{2,}\S/.test(line) && current.changes.length > 0) {
      current.changes[current.changes.length - 1] += ` ${line.trim()}`;
    }
  }
  return entries;
}

export const embeddedChangelog = parseChangelog(changelogText);
