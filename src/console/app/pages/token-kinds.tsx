/** A usage row's cached prompt tokens and reasoning tokens (each within its side of "prompt + completion"), when it has any. */
import { formatNumber, t } from '../locale';

export function TokenKinds({ cached, reasoning }: { cached: number; reasoning: number }) {
  if (!cached && !reasoning) return null;
  const parts = [cached ? `${formatNumber(cached)} ${t('usage.cached')}` : '', reasoning ? `${formatNumber(reasoning)} ${t('usage.reasoning')}` : ''].filter(Boolean);
  return (
    <>
      <br />
      <small>{parts.join(' · ')}</small>
    </>
  );
}
