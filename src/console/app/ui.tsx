/** Small building blocks every page uses: data loading, labelled fields with their errors, pagers, copy buttons. */
import type { ComponentChildren } from 'preact';
import { useCallback, useEffect, useId, useRef, useState } from 'preact/hooks';
import { ApiError, get } from './api';
import { humanError } from './error-text';
import { type Language, language, switchLanguage, t } from './locale';

export interface Loaded<T> {
  data: T | null;
  error: string | null;
  loading: boolean;
  reload: () => void;
}

/** GETs `path` (again whenever it changes or on reload); null path waits. */
export function useGet<T>(path: string | null): Loaded<T> {
  const [state, setState] = useState<{ data: T | null; error: string | null; loading: boolean }>({
    data: null,
    error: null,
    loading: path !== null,
  });
  const [round, setRound] = useState(0);
  useEffect(() => {
    if (path === null) return;
    let live = true;
    setState((s) => ({ ...s, loading: true }));
    get<T>(path).then(
      (data) => live && setState({ data, error: null, loading: false }),
      (e) => live && setState({ data: null, error: errorText(e), loading: false }),
    );
    return () => {
      live = false;
    };
  }, [path, round]);
  const reload = useCallback(() => setRound((r) => r + 1), []);
  return { ...state, reload };
}

/** An error to show: the API's message said for a person in the page's language (error-text.ts). */
export const errorText = (e: unknown) => (e instanceof ApiError ? humanError(e.message, t) : e instanceof Error ? e.message : String(e));

/** Shows loading, an error, or the children built from the data. */
export function Show<T>({ loaded, children }: { loaded: Loaded<T>; children: (data: T) => ComponentChildren }) {
  if (loaded.error) return <Alert>{loaded.error}</Alert>;
  if (loaded.data === null) return <p aria-busy="true">{t('loading')}</p>;
  return <>{children(loaded.data)}</>;
}

/** A list as a table (header cells in `head`, one row per item), or the `empty` message when it has none. */
export function DataTable<T>({
  rows,
  empty,
  head,
  row,
  ...table
}: {
  rows: T[];
  empty: string;
  head: ComponentChildren;
  row: (item: T) => ComponentChildren;
  'data-testid'?: string;
}) {
  if (rows.length === 0) return <p class="empty">{empty}</p>;
  return (
    <div class="table-wrap">
      <table {...table}>
        <thead>
          <tr>{head}</tr>
        </thead>
        <tbody>{rows.map(row)}</tbody>
      </table>
    </div>
  );
}

interface FieldProps {
  label: string;
  name: string;
  error?: string | null;
  hint?: string;
  type?: 'text' | 'password' | 'email' | 'date' | 'datetime-local' | 'search';
  value?: string;
  defaultValue?: string;
  /** The id of a <datalist> of suggestions. */
  list?: string;
  autocomplete?: string;
  inputMode?: 'decimal' | 'numeric';
  maxLength?: number;
  required?: boolean;
}

/** A labelled input whose error is shown right under it and announced with it (aria-describedby). */
export function Field({ label, error, hint, type = 'text', ...input }: FieldProps) {
  const id = useId();
  const described = [hint ? `${id}-hint` : '', error ? `${id}-error` : ''].filter(Boolean).join(' ') || undefined;
  return (
    <div class="field">
      <label for={id}>{label}</label>
      {/* Preact's types describe each input type separately, so a union of types is narrowed here to one of them. */}
      <input id={id} type={type as 'text'} aria-invalid={error ? 'true' : undefined} aria-describedby={described} {...input} />
      {hint && (
        <small id={`${id}-hint`} class="hint">
          {hint}
        </small>
      )}
      {error && (
        <small id={`${id}-error`} class="error" role="alert">
          {error}
        </small>
      )}
    </div>
  );
}

export function Select({ label, options, ...select }: { label: string; name: string; value?: string; options: Array<[string, string]> }) {
  const id = useId();
  return (
    <div class="field">
      <label for={id}>{label}</label>
      <select id={id} {...select}>
        {options.map(([value, text]) => (
          <option value={value}>{text}</option>
        ))}
      </select>
    </div>
  );
}

/** Cursor pages: keeps the cursors already passed so Previous can go back. */
export function useCursor() {
  const [stack, setStack] = useState<string[]>([]);
  const cursor = stack[stack.length - 1];
  return {
    cursor,
    reset: () => setStack([]),
    Pager: ({ next }: { next: string | null | undefined }) => (
      <nav class="pager" aria-label={t('pages')}>
        <button type="button" disabled={stack.length === 0} onClick={() => setStack((s) => s.slice(0, -1))}>
          {t('previous')}
        </button>
        <button type="button" disabled={!next} onClick={() => next && setStack((s) => [...s, next])}>
          {t('next')}
        </button>
      </nav>
    ),
  };
}

export function CopyButton({ text, label }: { text: string; label: string }) {
  const [copied, setCopied] = useState(false);
  return (
    <button
      type="button"
      onClick={async () => {
        await navigator.clipboard.writeText(text);
        setCopied(true);
      }}
    >
      {copied ? t('copied') : label}
      <span class="visually-hidden" role="status">
        {copied ? t('copied') : ''}
      </span>
    </button>
  );
}

/** An error announced to screen readers (role=alert); nothing when there is none. */
export const Alert = ({ children }: { children: ComponentChildren }) =>
  children ? (
    <p class="error" role="alert">
      {children}
    </p>
  ) : null;

/** A note announced to screen readers (role=status), e.g. "Saved". */
export const Status = ({ children }: { children: ComponentChildren }) => (
  <p class="status" role="status">
    {children}
  </p>
);

export function Page({ title, children }: { title: string; children: ComponentChildren }) {
  useEffect(() => {
    document.title = `${title} · cpd`;
  }, [title]);
  return (
    <section>
      <h1>{title}</h1>
      {children}
    </section>
  );
}

export function LanguageSwitch() {
  return (
    <label class="language">
      <span class="visually-hidden">{t('language')}</span>
      <select aria-label={t('language')} value={language} onChange={(e) => switchLanguage(e.currentTarget.value as Language)}>
        <option value="en">English</option>
        <option value="zh-CN">简体中文</option>
      </select>
    </label>
  );
}

/** A modal <dialog> (focus kept inside, Escape closes) shown while `open`; `onClose` runs on Escape or the close button. */
export function Dialog({
  open,
  title,
  onClose,
  children,
}: {
  open: boolean;
  title: string;
  onClose: () => void;
  children: ComponentChildren;
}) {
  const ref = useRef<HTMLDialogElement>(null);
  const id = useId();
  useEffect(() => {
    const dialog = ref.current;
    if (!dialog) return;
    if (open && !dialog.open) dialog.showModal();
    if (!open && dialog.open) dialog.close();
  }, [open]);
  return (
    <dialog ref={ref} aria-labelledby={id} onClose={onClose}>
      <h2 id={id}>{title}</h2>
      {open && children}
      <p>
        <button type="button" onClick={onClose}>
          {t('design.close')}
        </button>
      </p>
    </dialog>
  );
}

/** A button for a destructive action: it asks in a dialog first and runs `onConfirm` only on "yes". */
export function ConfirmButton({
  label,
  question,
  confirmLabel,
  onConfirm,
  ...button
}: {
  label: ComponentChildren;
  question: string;
  confirmLabel: string;
  onConfirm: () => unknown;
  'aria-label'?: string;
}) {
  const [asking, setAsking] = useState(false);
  return (
    <>
      <button type="button" class="danger" onClick={() => setAsking(true)} {...button}>
        {label}
      </button>
      <Dialog open={asking} title={question} onClose={() => setAsking(false)}>
        <button
          type="button"
          class="danger"
          onClick={async () => {
            setAsking(false);
            await onConfirm();
          }}
        >
          {confirmLabel}
        </button>
      </Dialog>
    </>
  );
}
