/**
 * Checks of a console page as it is drawn: axe-core's serious and critical accessibility violations
 * (the page's context needs `bypassCSP: true`, as the console's script policy refuses the injected
 * tool) and whatever makes the page scroll sideways.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Page } from 'playwright-core';

const AXE_SOURCE = readFileSync(join(import.meta.dir, '../../node_modules/axe-core/axe.min.js'), 'utf8');

/** The serious and critical axe-core violations on the page as it is now, as "rule: target" lines. */
export async function axeViolations(page: Page): Promise<string[]> {
  if (!(await page.evaluate('typeof window.axe !== "undefined"'))) await page.addScriptTag({ content: AXE_SOURCE });
  const found = await page.evaluate(async () => {
    // The page's globals, typed here without the DOM library.
    const { axe, document } = globalThis as unknown as {
      axe: {
        run(
          context: unknown,
          options: unknown,
        ): Promise<{ violations: Array<{ id: string; impact: string; nodes: Array<{ target: string[] }> }> }>;
      };
      document: unknown;
    };
    const { violations } = await axe.run(document, { resultTypes: ['violations'] });
    return violations
      .filter((v) => v.impact === 'serious' || v.impact === 'critical')
      .flatMap((v) => v.nodes.map((n) => `${v.id}: ${n.target.join(' ')}`));
  });
  return found.map((line) => `${page.url()} ${line}`);
}

/** Nothing when the page fits its width; else the outermost elements that stick out on the right (to say which). */
export const sidewaysCulprits = (page: Page) =>
  page.evaluate(`(() => {
    const root = document.scrollingElement;
    if (root.scrollWidth <= root.clientWidth) return [];
    // An absolutely positioned element escapes the scroll box of an ancestor that is not positioned.
    const found = [...document.body.querySelectorAll('*')]
      .filter((e) => e.getBoundingClientRect().right > root.clientWidth + 1 && e.parentElement.getBoundingClientRect().right <= root.clientWidth + 1)
      .slice(0, 3)
      .map((e) => e.tagName.toLowerCase() + (e.className ? '.' + e.className : '') + ' ' + (e.textContent || '').slice(0, 30));
    return found.length ? found : ['the page is wider than the window'];
  })()`) as Promise<string[]>;
