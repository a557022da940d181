/** Strings of sign-in with providers and linked identities in both languages; merged into messages.ts. */

export const en = {
  'oauth.signInWith': 'Sign in with {name}',
  'oauth.signUpWith': 'Sign up with {name}',
  'oauth.or': 'or',
  'oauth.failed': 'Signing in with the provider did not work: {reason}',
  'oauth.identities': 'Sign-in providers',
  'oauth.noIdentities': 'No provider is linked to this account.',
  'oauth.provider': 'Provider',
  'oauth.linkWith': 'Link {name}',
  'oauth.unlink': 'Unlink',
  'oauth.linked': '{name} is now linked: you can sign in with it.',
  'oauth.linkFailed': 'Linking did not work: {reason}',
  'oauth.setPassword': 'Set a password',
  'oauth.noPasswordYet': 'This account has no password yet: you sign in with a provider. Set one to sign in with your email too.',
};

export const zh: Record<keyof typeof en, string> = {
  'oauth.signInWith': '使用 {name} 登录',
  'oauth.signUpWith': '使用 {name} 注册',
  'oauth.or': '或',
  'oauth.failed': '通过第三方登录未成功：{reason}',
  'oauth.identities': '第三方登录',
  'oauth.noIdentities': '此账户尚未关联任何第三方账号。',
  'oauth.provider': '提供方',
  'oauth.linkWith': '关联 {name}',
  'oauth.unlink': '取消关联',
  'oauth.linked': '已关联 {name}，之后可用它登录。',
  'oauth.linkFailed': '关联未成功：{reason}',
  'oauth.setPassword': '设置密码',
  'oauth.noPasswordYet': '此账户还没有密码，目前通过第三方登录。设置密码后也可用邮箱登录。',
};
