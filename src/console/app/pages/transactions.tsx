/** The ledger, newest first, in cursor pages. */
import { withQuery } from '../api';
import { formatTime, t } from '../locale';
import { formatMoney } from '../money';
import { BillingOnly, orgQuery, useOrg } from '../org';
import { ledgerDescription } from '../product-text';
import { DataTable, Page, Show, useCursor, useGet } from '../ui';

interface Transaction {
  id: string;
  type: string;
  amount: number;
  currency: string;
  created_at: string;
  description: string;
}

export const Transactions = () => (
  <BillingOnly title={t('nav.transactions')}>
    <Ledger />
  </BillingOnly>
);

function Ledger() {
  const { current: org } = useOrg();
  const { cursor, Pager } = useCursor();
  const page = useGet<{ transactions: Transaction[]; next_cursor: string | null }>(
    withQuery('/api/billing/transactions', { limit: 50, cursor, ...orgQuery(org) }),
  );
  return (
    <Page title={t('nav.transactions')}>
      <Show loaded={page}>
        {({ transactions, next_cursor }) => (
          <>
            <DataTable
              rows={transactions}
              empty={t('none')}
              head={
                <>
                  <th>{t('time')}</th>
                  <th>{t('tx.type')}</th>
                  <th class="num">{t('amount')}</th>
                  <th>{t('description')}</th>
                </>
              }
              row={(tx) => (
                <tr key={tx.id}>
                  <td>{formatTime(tx.created_at)}</td>
                  <td>{t(`tx.${tx.type}` as 'tx.topup', {}) || tx.type}</td>
                  <td class="num">{formatMoney(tx.amount, tx.currency)}</td>
                  <td>{ledgerDescription(tx.description, t)}</td>
                </tr>
              )}
            />
            <Pager next={next_cursor} />
          </>
        )}
      </Show>
    </Page>
  );
}
