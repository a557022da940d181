/** Stylesheets imported for their side effect: Bun.build bundles them into the console's CSS file. */
declare module '*.css';
