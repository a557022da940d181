/**
 * Sign-in with providers: the buttons on /login and /signup (drawn from /api/site's
 * features.oauth) and the linked identities on the account page. A provider's callback sends the
 * browser back with `?oauth_error=…` (or `?linked=…`), shown here.
 */
import { useState } from 'preact/hooks';
import { api } from '../api';
import { formatTime, t } from '../locale';
import { Alert, ConfirmButton, Show, Status, errorText, useGet } from '../ui';

type ProviderId = 'github' | 'google' | 'oidc';
interface SiteFeatures {
  features: { oauth: ProviderId[]; oidc_name: string | null };
}
interface Identity {
  id: string;
  provider: string;
  email: string | null;
  created_at: string;
}

const providerName = (id: string, oidcName: string | null) => (id === 'github' ? 'GitHub' : id === 'google' ? 'Google' : (oidcName ?? id));
const queryParam = (name: string) => new URLSearchParams(location.search).get(name);

/** "Sign in with …" links to the enabled providers, and a failed provider sign-in's reason. */
export function ProviderButtons({ signUp = false }: { signUp?: boolean }) {
  const site = useGet<SiteFeatures>('/api/site');
  const failed = queryParam('oauth_error');
  const providers = site.data?.features.oauth ?? [];
  return (
    <>
      {failed && <Alert>{t('oauth.failed', { reason: failed })}</Alert>}
      {providers.length > 0 && (
        <div class="providers">
          <p>{t('oauth.or')}</p>
          {providers.map((id) => (
            // target=_top: a full page load to the server (the console's router takes same-origin links with no target).
            <a key={id} class="button" href={`/api/auth/oauth/${id}`} target="_top" data-provider={id}>
              {t(signUp ? 'oauth.signUpWith' : 'oauth.signInWith', { name: providerName(id, site.data!.features.oidc_name) })}
            </a>
          ))}
        </div>
      )}
    </>
  );
}

/** The account's linked providers: unlink one (the server refuses the last way to sign in), link another. */
export function LinkedIdentities() {
  const site = useGet<SiteFeatures>('/api/site');
  const identities = useGet<Identity[]>('/api/auth/identities');
  const [error, setError] = useState<string | null>(() => {
    const failed = queryParam('oauth_error');
    return failed ? t('oauth.linkFailed', { reason: failed }) : null;
  });
  const oidcName = site.data?.features.oidc_name ?? null;
  const linked = queryParam('linked');

  async function unlink(identity: Identity) {
    setError(null);
    try {
      await api('DELETE', `/api/auth/identities/${encodeURIComponent(identity.id)}`);
      identities.reload();
    } catch (err) {
      setError(errorText(err));
    }
  }
  async function link(id: ProviderId) {
    setError(null);
    try {
      const { url } = await api<{ url: string }>('POST', `/api/auth/oauth/${id}/link`);
      location.assign(url);
    } catch (err) {
      setError(errorText(err));
    }
  }

  return (
    <section aria-labelledby="identities-heading">
      <h2 id="identities-heading">{t('oauth.identities')}</h2>
      {linked && <Status>{t('oauth.linked', { name: providerName(linked, oidcName) })}</Status>}
      <Alert>{error}</Alert>
      <Show loaded={identities}>
        {(list) =>
          list.length === 0 ? (
            <p>{t('oauth.noIdentities')}</p>
          ) : (
            <table>
              <thead>
                <tr>
                  <th>{t('oauth.provider')}</th>
                  <th>{t('email')}</th>
                  <th>{t('created')}</th>
                  <th>
                    <span class="visually-hidden">{t('actions')}</span>
                  </th>
                </tr>
              </thead>
              <tbody>
                {list.map((identity) => (
                  <tr key={identity.id}>
                    <td>{providerName(identity.provider, oidcName)}</td>
                    <td>{identity.email ?? '—'}</td>
                    <td>{formatTime(identity.created_at)}</td>
                    <td>
                      <ConfirmButton
                        label={t('oauth.unlink')}
                        question={t('product.confirmUnlink', { name: providerName(identity.provider, oidcName) })}
                        confirmLabel={t('oauth.unlink')}
                        onConfirm={() => unlink(identity)}
                      />
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          )
        }
      </Show>
      {(site.data?.features.oauth ?? []).map((id) => (
        <button key={id} type="button" onClick={() => link(id)} data-provider={id}>
          {t('oauth.linkWith', { name: providerName(id, oidcName) })}
        </button>
      ))}
    </section>
  );
}
