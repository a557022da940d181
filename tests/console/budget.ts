/** First load of /login: the JavaScript and CSS it names, gzip-compressed as served. */
export const LOGIN_BUDGET_BYTES = 150 * 1024;
