/**
 * The console's entry: one small client app (Preact + preact-iso's router) drawn from the JSON API.
 * /login, /signup and the pages of mailed links need no session; every /console page loads the caller once (GET /api/auth/me).
 */
import './styles.css';
import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { LocationProvider, lazy, Route, Router, useLocation } from 'preact-iso';
import { logOut } from './api';
import { site, t } from './locale';
import type { Key } from './messages';
import { type Me, MeContext } from './me';
import { type Org, OrgProvider, managesOrg, useOrg } from './org';
import { OrgSwitcher } from './org-switcher';
import { AdminAudit } from './admin/audit';
import { AdminCaptureRules } from './admin/capture-rules';
import { AdminCost } from './admin/cost';
import { AdminHealth } from './admin/health';
import { AdminPayments } from './admin/payments';
import { AdminPricing } from './admin/pricing';
import { AdminCodes } from './admin/codes';
import { AdminPriceGroups } from './admin/price-groups';
import { AdminUser, AdminUsers } from './admin/users';
import { Account } from './pages/account';
import { Dashboard } from './pages/dashboard';
import { BillingDocuments } from './pages/billing-documents';
import { ApiKeys } from './pages/api-keys';
import { AdminCaptureView, AdminCaptures, CaptureView, Captures } from './pages/captures';
import { Login, Signup } from './pages/sign-in';
import { ForgotPassword, ResetPassword, VerifyEmail, VerifyEmailNotice } from './pages/mail';
import { Models } from './pages/models';
import { OrgAudit } from './pages/org-audit';
import { AcceptInvite } from './pages/org-invites';
import { NewOrg } from './pages/org-new';
import { OrgSettings } from './pages/org-settings';
import { Transactions } from './pages/transactions';
import { Usage } from './pages/usage';
import { Wallet } from './pages/wallet';
import { Webhooks } from './pages/webhooks';
import { LanguageSwitch, Show, useGet } from './ui';

type NavLink = [string, Key];
type NavGroup = { title: Key | null; links: NavLink[] };

const MONEY_NAV: NavGroup = {
  title: 'nav.group.money',
  links: [
    ['/console/wallet', 'nav.wallet'],
    ['/console/usage', 'nav.usage'],
    ['/console/transactions', 'nav.transactions'],
    [site === 'cn' ? '/console/invoices' : '/console/receipts', site === 'cn' ? 'nav.invoices' : 'nav.receipts'],
  ],
};

/** The chosen organization's own group: its page, and its audit log for owners and admins. */
const orgNav = (org: Org): NavGroup => {
  const base = `/console/orgs/${encodeURIComponent(org.id)}`;
  return {
    title: 'nav.group.org',
    links: [[base, 'nav.org'], ...(managesOrg(org) ? [[`${base}/audit`, 'nav.orgAudit'] as NavLink] : [])],
  };
};

/** The user's navigation for the account shown: an organization's billing is for its owners and admins only. */
const userNav = (org: Org | null): NavGroup[] => [
  {
    title: null,
    links: [
      ['/console', 'nav.dashboard'],
      ['/console/keys', 'nav.keys'],
      ['/console/playground', 'nav.playground'],
      ['/console/models', 'nav.models'],
    ],
  },
  ...(org ? [orgNav(org)] : []),
  ...(org && !managesOrg(org) ? [] : [MONEY_NAV]),
  {
    title: 'nav.group.build',
    links: [
      ['/console/captures', 'nav.captures'],
      ['/console/webhooks', 'nav.webhooks'],
      ['/console/account', 'nav.account'],
    ],
  },
];
const ADMIN_NAV: NavGroup[] = [
  {
    title: 'nav.group.admin.people',
    links: [
      ['/console/admin/users', 'nav.admin.users'],
      ['/console/admin/payments', 'nav.admin.payments'],
      ['/console/admin/pricing', 'nav.admin.pricing'],
      ['/console/admin/price-groups', 'nav.admin.priceGroups'],
      ['/console/admin/codes', 'nav.admin.codes'],
      ['/console/admin/cost', 'nav.admin.cost'],
    ],
  },
  {
    title: 'nav.group.admin.system',
    links: [
      ['/console/admin/health', 'nav.admin.health'],
      ['/console/admin/audit', 'nav.admin.audit'],
    ],
  },
  {
    title: 'nav.group.admin.data',
    links: [
      ['/console/admin/captures', 'nav.admin.captures'],
      ['/console/admin/capture', 'nav.admin.captureRules'],
    ],
  },
];

// The playground's streaming client is its own chunk, loaded when the page is first opened.
const Playground = lazy(() => import('./pages/playground').then((m) => m.Playground));

function Shell() {
  const me = useGet<Me>('/api/auth/me');
  const org = useOrg();
  const { path } = useLocation();
  const [menuOpen, setMenuOpen] = useState(false);
  // A followed link closes the phone menu.
  useEffect(() => setMenuOpen(false), [path]);
  // The pages read the chosen account: they wait until it is known.
  if (!org.ready) return <p aria-busy="true">{t('loading')}</p>;
  const nav = userNav(org.current);
  // A link is current on its page and on the pages below it that have no link of their own (a capture under Captures).
  const linked = new Set([...nav, ...ADMIN_NAV].flatMap((group) => group.links.map(([href]) => href)));
  const current = (href: string) => path === href || (href !== '/console' && path.startsWith(`${href}/`) && !linked.has(path));
  const link = ([href, key]: NavLink) => (
    <li key={href}>
      <a href={href} aria-current={current(href) ? 'page' : undefined}>
        {t(key)}
      </a>
    </li>
  );
  const groups = (list: NavGroup[]) =>
    list.map((group) => (
      <>
        {group.title && <h2>{t(group.title)}</h2>}
        <ul>{group.links.map(link)}</ul>
      </>
    ));
  return (
    <Show loaded={me}>
      {(user) => (
        <MeContext.Provider value={user}>
          <a class="skip" href="#main">
            {t('skip')}
          </a>
          <div class="app">
            <header class="topbar">
              <button
                type="button"
                class="menu-button"
                aria-expanded={menuOpen ? 'true' : 'false'}
                aria-controls="sidebar"
                onClick={() => setMenuOpen(!menuOpen)}
              >
                {t('design.menu')}
              </button>
              <a class="brand" href="/console">
                cpd
              </a>
              <OrgSwitcher />
              <span class="who">{user.email ?? user.phone}</span>
              <LanguageSwitch />
              <button
                type="button"
                onClick={logOut}
              >
                {t('logout')}
              </button>
            </header>
            <div id="sidebar" class={menuOpen ? 'sidebar open' : 'sidebar'}>
              <nav aria-label={t('nav.user')}>{groups(nav)}</nav>
              {user.is_admin && <nav aria-label={t('nav.admin')}>{groups(ADMIN_NAV)}</nav>}
            </div>
            <main id="main">
              <VerifyEmailNotice me={user} />
              <Router>
                <Route path="/console" component={Dashboard} />
                <Route path="/console/wallet" component={Wallet} />
                <Route path="/console/playground" component={Playground} />
                <Route path="/console/keys" component={ApiKeys} />
                <Route path="/console/transactions" component={Transactions} />
                <Route path="/console/usage" component={Usage} />
                <Route path="/console/invoices" component={BillingDocuments} />
                <Route path="/console/receipts" component={BillingDocuments} />
                <Route path="/console/models" component={Models} />
                <Route path="/console/webhooks" component={Webhooks} />
                <Route path="/console/account" component={Account} />
                <Route path="/console/admin" component={AdminUsers} />
                <Route path="/console/admin/users" component={AdminUsers} />
                <Route path="/console/admin/users/:id" component={AdminUser} />
                <Route path="/console/admin/payments" component={AdminPayments} />
                <Route path="/console/admin/pricing" component={AdminPricing} />
                <Route path="/console/admin/price-groups" component={AdminPriceGroups} />
                <Route path="/console/admin/codes" component={AdminCodes} />
                <Route path="/console/admin/health" component={AdminHealth} />
                <Route path="/console/admin/cost" component={AdminCost} />
                <Route path="/console/admin/audit" component={AdminAudit} />
                <Route path="/console/captures" component={Captures} />
                <Route path="/console/captures/:id" component={CaptureView} />
                <Route path="/console/admin/captures" component={AdminCaptures} />
                <Route path="/console/admin/captures/:id" component={AdminCaptureView} />
                <Route path="/console/admin/capture" component={AdminCaptureRules} />
                <Route path="/console/orgs/new" component={NewOrg} />
                <Route path="/console/orgs/:id" component={OrgSettings} />
                <Route path="/console/orgs/:id/audit" component={OrgAudit} />
                <Route path="/console/invite" component={AcceptInvite} />
                <Route default component={NotFound} />
              </Router>
            </main>
          </div>
        </MeContext.Provider>
      )}
    </Show>
  );
}

const NotFound = () => <p>{t('notFound')}</p>;

function Pages() {
  const { path } = useLocation();
  if (path === '/login') return <Login />;
  if (path === '/signup') return <Signup />;
  if (path === '/forgot-password') return <ForgotPassword />;
  if (path === '/reset-password') return <ResetPassword />;
  if (path === '/verify-email') return <VerifyEmail />;
  return (
    <OrgProvider>
      <Shell />
    </OrgProvider>
  );
}

function App() {
  return (
    <LocationProvider>
      <Pages />
    </LocationProvider>
  );
}

// Invite links name their page in the fragment (/console/#/invite?token=…); it is /console/invite.
const invite = /^#\/invite(\?.*)?$/.exec(location.hash);
if (location.pathname.startsWith('/console') && invite) history.replaceState(null, '', `/console/invite${invite[1] ?? ''}`);

render(<App />, document.getElementById('app')!);
