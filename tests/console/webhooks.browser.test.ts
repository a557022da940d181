/**
 * The webhooks page in a real browser against dist/cpd (WEBHOOK_ALLOW_PRIVATE=true, a receiver on
 * 127.0.0.1): an endpoint is added with one event (the console's own check first), its secret is
 * shown once and verifies what the receiver gets after a sandbox top-up; the delivery log shows it,
 * Retry sends it again, the endpoint is disabled and deleted. Then the page in Chinese.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test';
import type { Browser } from 'playwright-core';
import { launchBrowser, openPage } from '../support/browser';
import { type ConsoleSite, startConsoleSite } from '../support/console-site';
import { waitFor } from '../support/wait';
import { type Receiver, startReceiver } from '../support/webhook-receiver';

setDefaultTimeout(180_000);

let site: ConsoleSite;
let browser: Browser;
let rx: Receiver;

beforeAll(async () => {
  rx = startReceiver();
  [site, browser] = await Promise.all([startConsoleSite('intl', { WEBHOOK_ALLOW_PRIVATE: 'true' }), launchBrowser()]);
}, 120_000);
afterAll(async () => {
  await browser?.close();
  await site?.stop();
  await rx?.close();
});

describe('the webhooks page', () => {
  test('adds an endpoint, shows the secret once, lists deliveries, retries, disables and deletes', async () => {
    const registered = await fetch(`${site.url}/api/auth/register`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email: 'hooks@example.com', password: 'a-good-password' }),
    });
    const { token } = (await registered.json()) as { token: string };

    const { page, problems } = await openPage(browser, site.url);
    await page.goto(`${site.url}/login`);
    await page.getByLabel('Email or phone').fill('hooks@example.com');
    await page.getByLabel('Password').fill('a-good-password');
    await page.getByRole('button', { name: 'Log in' }).click();
    await page.waitForURL(`${site.url}/console`);
    await page.getByRole('link', { name: 'Webhooks' }).click();

    const create = page.getByRole('form', { name: 'Add endpoint' });
    await create.getByLabel('Endpoint URL (https://)').fill(rx.url);
    await create.getByRole('button', { name: 'Add endpoint' }).click();
    await create.getByText('Pick at least one event.').waitFor();
    expect((await site.call('GET', '/api/webhooks', token)).body).toEqual({ webhooks: [] });

    await create.getByLabel('Top-up paid').check();
    await create.getByRole('button', { name: 'Add endpoint' }).click();
    const secret = (await page.getByTestId('new-webhook-secret').textContent())!;
    expect(secret).toMatch(/^whsec_/);
    rx.secret = secret;
    const [made] = (await site.call('GET', '/api/webhooks', token)).body.webhooks;
    expect(made).toMatchObject({ url: rx.url, events: ['payment.paid'], enabled: true });
    expect(JSON.stringify(made)).not.toContain(secret);

    const payment = await site.call('POST', '/api/billing/payments', token, { provider: 'card', amount: 5, currency: 'USD' });
    expect((await fetch(`${site.url}/api/payments/sandbox/${payment.body.id}/pay`, { method: 'POST', redirect: 'manual' })).status).toBe(
      303,
    );
    const got = (await waitFor(() => rx.received[0], 'payment.paid at the receiver'))!;
    expect(got).toMatchObject({ valid: true, type: 'payment.paid' });

    const row = page.getByRole('row').filter({ has: page.getByRole('cell', { name: rx.url }) });
    await row.getByRole('button', { name: `Deliveries to ${rx.url}` }).click();
    const log = page.getByTestId('webhook-deliveries');
    await log.getByText('Delivered').waitFor();
    await log.getByRole('button', { name: `Retry ${got.eventId} now` }).click();
    await page.getByText('Queued: it is sent again within seconds.').waitFor();
    await waitFor(() => rx.countsByEvent().get(got.eventId), 'the retried delivery', { until: (n) => n === 2 });
    expect(rx.received.every((r) => r.valid)).toBe(true);

    await row.getByRole('button', { name: `Disable ${rx.url}` }).click();
    await row.getByRole('cell', { name: 'Disabled', exact: true }).waitFor();
    expect((await site.call('GET', `/api/webhooks/${made.id}`, token)).body.enabled).toBe(false);
    await row.getByRole('button', { name: `Delete ${rx.url}` }).click();
    await page.getByRole('dialog', { name: `Delete the endpoint ${rx.url} and its delivery log? Nothing more is sent to it.` }).getByRole('button', { name: 'Delete', exact: true }).click();
    await page.getByText('No endpoints yet.').waitFor();
    expect((await site.call('GET', '/api/webhooks', token)).body).toEqual({ webhooks: [] });

    await page.getByLabel('Language').selectOption('zh-CN');
    await page.getByRole('button', { name: '添加接收地址' }).waitFor();
    await page.getByText('充值已到账').waitFor();
    expect(problems).toEqual([]);
    await page.context().close();
  }, 120_000);
});
