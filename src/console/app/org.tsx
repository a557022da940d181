/**
 * Whose account the console shows: the caller's own (personal) or one of its organizations. The
 * choice is remembered in this browser (localStorage) and read by the keys, billing and usage pages,
 * which then ask the API for that organization's data (`org_id`). Billing of an organization is for
 * its owners and admins; a member sees its keys and its own spend limit only.
 */
import type { ComponentChildren } from 'preact';
import { createContext } from 'preact';
import { useContext, useEffect, useState } from 'preact/hooks';
import { t } from './locale';
import { Page, useGet } from './ui';

export type OrgRole = 'owner' | 'admin' | 'member';

export interface Org {
  id: string;
  name: string;
  currency: string;
  role: OrgRole;
  member_count: number;
  created_at: string;
}

export interface OrgState {
  /** The caller's organizations (empty until loaded, or when the list cannot be had). */
  orgs: Org[];
  /** The organization the console shows, or null for the personal account. */
  current: Org | null;
  /** Shows `id`'s organization from now on (null: the personal account). */
  choose: (id: string | null) => void;
  /** Loads the list again (after renaming or leaving one). */
  reload: () => void;
  /** A just created or joined organization: chosen at once, shown in the list until the list is loaded again. */
  enter: (org: Org) => void;
  /** An organization left or deleted: the personal account is chosen, and the organization is gone from the list at once. */
  leave: (id: string) => void;
  /** The list has been asked for (answered or refused), so `current` is known. */
  ready: boolean;
}

const STORAGE_KEY = 'cpd.org';

function remembered(): string | null {
  try {
    return localStorage.getItem(STORAGE_KEY);
  } catch {
    // Storage refused (a locked-down browser): the choice lasts for this page only.
    return null;
  }
}

function remember(id: string | null) {
  try {
    if (id) localStorage.setItem(STORAGE_KEY, id);
    else localStorage.removeItem(STORAGE_KEY);
  } catch {
    // As above: nothing to keep it in.
  }
}

export const OrgContext = createContext<OrgState>({
  orgs: [],
  current: null,
  choose: () => {},
  reload: () => {},
  enter: () => {},
  leave: () => {},
  ready: true,
});
export const useOrg = () => useContext(OrgContext);

/** The shell's state of the choice; an organization the caller left (or was removed from) falls back to personal. */
function useOrgState(): OrgState {
  const list = useGet<{ orgs: Org[] }>('/api/orgs');
  const [chosen, setChosen] = useState<string | null>(remembered);
  // An organization just entered or left, and the list that does not know it yet: the change shows until that list is replaced.
  const [change, setChange] = useState<{ before: unknown; entered?: Org; left?: string } | null>(null);
  const listed = list.data?.orgs ?? [];
  const pending = change && list.data === change.before ? change : null;
  const orgs = [
    ...listed.filter((o) => o.id !== pending?.left && o.id !== pending?.entered?.id),
    ...(pending?.entered ? [pending.entered] : []),
  ];
  const choose = (id: string | null) => {
    remember(id);
    setChosen(id);
  };
  return {
    orgs,
    current: orgs.find((o) => o.id === chosen) ?? null,
    choose,
    enter: (org) => {
      setChange({ before: list.data, entered: org });
      choose(org.id);
      list.reload();
    },
    leave: (id) => {
      setChange({ before: list.data, left: id });
      choose(null);
      list.reload();
    },
    reload: list.reload,
    ready: list.data !== null || list.error !== null,
  };
}

/** Role names in the page's language. */
export const roleName = (role: OrgRole) => t(`orgs.role.${role}`);

/** The roles a caller may give: owners give any, admins give admin and member. */
export const assignableRoles = (caller: OrgRole): OrgRole[] => (caller === 'owner' ? ['owner', 'admin', 'member'] : ['admin', 'member']);

/** Gives the console's pages the choice (the shell's; its state lives as long as the page). */
export function OrgProvider({ children }: { children: ComponentChildren }) {
  return <OrgContext.Provider value={useOrgState()}>{children}</OrgContext.Provider>;
}

/** An organization's own pages (opened from a bookmark or a link) make it the chosen account, so the navigation and the switch agree with the page. */
export function useOrgPage(id: string) {
  const { orgs, current, choose } = useOrg();
  const known = orgs.some((o) => o.id === id);
  useEffect(() => {
    if (known && current?.id !== id) choose(id);
  }, [id, known]);
}

export const managesOrg = (org: Org | null) => org !== null && (org.role === 'owner' || org.role === 'admin');

/** The query that scopes a request to the chosen organization: `{org_id}` or nothing for the personal account. */
export const orgQuery = (org: Org | null) => (org ? { org_id: org.id } : {});

/** A billing page: the chosen organization's billing shows to its owners and admins; a member is told why it sees none. */
export function BillingOnly({ title, children }: { title: string; children: ComponentChildren }) {
  const { current } = useOrg();
  if (current && !managesOrg(current))
    return (
      <Page title={title}>
        <p class="notice" data-testid="billing-hidden">
          {t('orgs.billingHidden', { org: current.name })}
        </p>
      </Page>
    );
  return <>{children}</>;
}
