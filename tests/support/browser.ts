/**
 * A real browser for the console tests: Debian's chromium driven by playwright-core (no browser
 * download; `make test` installs the package). One browser per test file; each test opens a fresh
 * context (its own cookies). Every page is watched: a console error, an uncaught exception or a
 * request to another origin is recorded, and the test asserts there were none.
 *
 *   const browser = await launchBrowser();
 *   const { page, problems } = await openPage(browser, cpd.url, { locale: 'zh-CN' });
 *   await page.goto(`${cpd.url}/login`);
 *   await screenshot(page, 'login');
 *   expect(problems).toEqual([]);
 *   await browser.close();
 */
import { mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { type Browser, type BrowserContextOptions, chromium, type Locator, type Page } from 'playwright-core';

export const CHROMIUM_PATH = '/usr/bin/chromium';
const RESULTS = resolve(import.meta.dir, '../../test-results/console');

/** Headless chromium with nothing that talks to the network by itself (updates, sync, QUIC probes). Playwright gives it a fresh profile directory. */
export function launchBrowser(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM_PATH,
    headless: true,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
}

export interface WatchedPage {
  page: Page;
  /** Console errors, page errors and requests to other origins, in order. */
  problems: string[];
}

export async function openPage(browser: Browser, origin: string, options: BrowserContextOptions = {}): Promise<WatchedPage> {
  const context = await browser.newContext({ locale: 'en-US', ...options });
  const problems: string[] = [];
  const expected = new URL(origin).origin;
  context.on('request', (request) => {
    const url = request.url();
    if (!url.startsWith('data:') && !url.startsWith('blob:') && new URL(url).origin !== expected)
      problems.push(`request to another origin: ${url}`);
  });
  context.on('page', (page) => watch(page, problems));
  // Well inside each test's own time limit, so a stuck step fails naming the locator it waited for.
  context.setDefaultTimeout(20_000);
  const page = await context.newPage();
  return { page, problems };
}

function watch(page: Page, problems: string[]) {
  page.on('console', (message) => {
    if (message.type() === 'error') problems.push(`console error on ${page.url()}: ${message.text()}`);
  });
  page.on('pageerror', (error) => problems.push(`page error on ${page.url()}: ${error.message}`));
  page.on('crash', () => problems.push(`page crashed on ${page.url()}`));
}

/** Saves test-results/console/<name>.png (git-ignored) for a person to look at. */
export async function screenshot(page: Page, name: string) {
  mkdirSync(RESULTS, { recursive: true });
  await page.screenshot({ path: join(RESULTS, `${name}.png`), fullPage: true });
}

/** Waits (within the context's timeout) until an <img> has loaded a picture; typed here without the DOM library. */
export async function waitForImage(image: Locator) {
  const handle = await image.elementHandle();
  await image
    .page()
    .waitForFunction((img: { complete: boolean; naturalWidth: number } | null) => !!img && img.complete && img.naturalWidth > 0, handle);
}

/** What the page's clipboard holds (the context needs the clipboard-read permission). */
export const clipboardText = (page: Page) =>
  page.evaluate(() =>
    (globalThis as unknown as { navigator: { clipboard: { readText(): Promise<string> } } }).navigator.clipboard.readText(),
  );

/** The computed outline style of an element (the focus ring is 'solid' while it shows). */
export const outlineStyle = (element: Locator) =>
  element.evaluate(
    (el) => (globalThis as unknown as { getComputedStyle(e: unknown): { outlineStyle: string } }).getComputedStyle(el).outlineStyle,
  );
