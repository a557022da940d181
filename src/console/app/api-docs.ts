/**
 * Starts the embedded Swagger UI (loaded just before this file as a classic script) on the spec's
 * absolute path, read from the page, so it works whatever path the page was opened at.
 */
declare const SwaggerUIBundle: (options: Record<string, unknown>) => unknown;

const root = document.getElementById('swagger-ui')!;
SwaggerUIBundle({ url: root.dataset.specUrl, domNode: root, deepLinking: true, validatorUrl: null, tryItOutEnabled: false });
