/**
 * The words of the public pages (/, /models, /models/{slug}, /pricing, /downloads) in English and
 * Simplified Chinese. A page is in the visitor's language as the console chooses it (the cpd_lang
 * switch, then Accept-Language, then the site's default: Chinese on the China site).
 */
import type { Config } from '../../config';
import { chooseLanguage, type Language } from '../../platform/http/language';

const en = {
  siteName: { intl: 'cpd International', cn: 'cpd China' },
  currencyName: (currency: string) => currency,
  money: (value: number, currency: string) => `${value.toLocaleString('en-US', { maximumFractionDigits: 6 })} ${currency}`,
  nav: { models: 'Models', pricing: 'Pricing', downloads: 'Downloads', login: 'Log in', signup: 'Sign up' },
  home: {
    intro: (currency: string) =>
      `Quantized model bundles to download, an OpenAI-compatible inference gateway billed from a prepaid wallet in ${currency}, and the latest engine, router, agent and memo releases.`,
    models: (n: number) => `: ${n} ${n === 1 ? 'bundle' : 'bundles'}, downloadable with an API key.`,
    pricing: (currency: string) => `: per model and per GPU, in ${currency}.`,
    downloads: ': the newest runtime releases.',
    apiReference: 'API reference',
  },
  models: {
    title: 'Models',
    head: ['Model', 'Family', 'Quantizations', 'SDK', 'Size'],
    none: 'No models are published yet.',
    notFoundTitle: 'Not found',
    notFound: 'Model not found',
    all: 'All models',
    family: 'Family',
    slug: 'slug',
    latestSdk: 'latest SDK',
    artifactHead: ['Quantization', 'SDK', 'Form', 'Size', 'SHA-256'],
    zip: 'ZIP bundle',
    file: 'file',
    download: 'Download',
  },
  pricing: {
    title: 'Pricing',
    intro: (currency: string) => `Prices in ${currency}, charged from the prepaid wallet.`,
    models: 'Models',
    head: ['Model', 'Price'],
    units: { per_million_tokens: 'per million tokens', per_request: 'per request' } as Record<string, string>,
    tokenKinds: { input: 'input', output: 'output', cached: 'cached input' },
    noModels: 'No model prices are set.',
    gpus: 'GPUs',
    gpuHead: ['GPU', 'Per hour'],
    noGpus: 'No GPU prices are set.',
  },
  downloads: {
    title: 'Downloads',
    intro: 'The latest release of each component. Engine and router archives come with their FFI library for every platform.',
    unavailable: (error: string) => `Release information is unavailable right now (${error}). Please try again later.`,
    prerelease: ' (pre-release)',
    published: 'published',
    head: ['File', 'Size', 'Digest'],
    noFiles: 'No files for this component in the release.',
  },
};

export type PublicText = typeof en;

const zh: PublicText = {
  siteName: { intl: 'cpd 国际站', cn: 'cpd 中国站' },
  currencyName: (currency: string) => ({ CNY: '人民币', USD: '美元' })[currency] ?? currency,
  money: (value: number, currency: string) =>
    value.toLocaleString('zh-CN', { style: 'currency', currency, minimumFractionDigits: 2, maximumFractionDigits: 6 }),
  nav: { models: '模型', pricing: '价格', downloads: '下载', login: '登录', signup: '注册' },
  home: {
    intro: (currency: string) => `可下载的量化模型包，与 OpenAI 兼容、从预付钱包以${currency}计费的推理网关，以及 engine、router、agent、memo 的最新版本。`,
    models: (n: number) => `：${n} 个模型包，可使用 API 密钥下载。`,
    pricing: (currency: string) => `：按模型和 GPU 计价，以${currency}结算。`,
    downloads: '：最新的运行时版本。',
    apiReference: 'API 参考',
  },
  models: {
    title: '模型',
    head: ['模型', '系列', '量化', 'SDK', '大小'],
    none: '尚未发布任何模型。',
    notFoundTitle: '未找到',
    notFound: '模型不存在',
    all: '全部模型',
    family: '系列',
    slug: '标识',
    latestSdk: '最新 SDK',
    artifactHead: ['量化', 'SDK', '形式', '大小', 'SHA-256'],
    zip: 'ZIP 包',
    file: '文件',
    download: '下载',
  },
  pricing: {
    title: '价格',
    intro: (currency: string) => `价格以${currency}计，从预付钱包扣费。`,
    models: '模型',
    head: ['模型', '价格'],
    units: { per_million_tokens: '每百万 token', per_request: '每次请求' },
    tokenKinds: { input: '输入', output: '输出', cached: '缓存输入' },
    noModels: '尚未设置模型价格。',
    gpus: 'GPU',
    gpuHead: ['GPU', '每小时'],
    noGpus: '尚未设置 GPU 价格。',
  },
  downloads: {
    title: '下载',
    intro: '各组件的最新版本。engine 与 router 的归档附带各平台的 FFI 库。',
    unavailable: (error: string) => `暂时无法获取版本信息（${error}），请稍后再试。`,
    prerelease: '（预发布）',
    published: '发布于',
    head: ['文件', '大小', '摘要'],
    noFiles: '此版本中没有该组件的文件。',
  },
};

const TEXT: Record<Language, PublicText> = { en, 'zh-CN': zh };

/** The language of a public page for `request` on `site`, and its words. */
export function publicText(site: Config['site'], request: Request): { language: Language; text: PublicText } {
  const language = chooseLanguage(site, request.headers.get('cookie'), request.headers.get('accept-language'));
  return { language, text: TEXT[language] };
}
