declare module '*.md' {
  const text: string;
  export default text;
}
declare module '*.sql' {
  const text: string;
  export default text;
}
declare module '*.wasm' {
  const path: string;
  export default path;
}
declare module '*.data' {
  const path: string;
  export default path;
}
