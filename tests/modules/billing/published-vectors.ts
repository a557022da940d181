/**
 * Payment providers' own published signing examples, kept byte for byte, each beside the page it
 * comes from. tests/modules/billing/providers.vectors.test.ts holds our signing and verification
 * code to them, so a misreading of a provider's rules cannot hide behind a fake written from the
 * same reading.
 */

/**
 * Stripe's own fixed webhook vector, from its .NET library's tests:
 * https://github.com/stripe/stripe-dotnet/blob/master/src/StripeTests/Services/Events/EventUtilityTest.cs
 * and the signed body, https://github.com/stripe/stripe-dotnet/blob/master/src/StripeTests/Resources/event_test_signature.json
 * (its line ends are \n, with one after the closing brace). The header format `t=…,v1=…` and
 * v1 = HMAC-SHA256(secret, "{t}.{body}") are Stripe's documented scheme:
 * https://docs.stripe.com/webhooks#verify-manually
 */
export const STRIPE_WEBHOOK = {
  secret: 'webhook_secret',
  timestamp: 1533204620,
  header:
    't=1533204620,v1=2220f87ef101a04665f11cdf770523143f875572008577fa0f20882ddb9cc3c7,v0=63f3a72374a733066c4be69ed7f8e5ac85c22c9f0a6a612ab9a025a9e4ee7eef',
  body: '{\n  "id": "evt_123",\n  "object": "event",\n  "account": "acct_123",\n  "api_version": "2017-05-25",\n  "created": 1533204620,\n  "data": {\n    "object": {\n      "id": "cus_123",\n      "object": "customer",\n      "created": 123456789,\n      "email": "test@stripe.com",\n      "livemode": false,\n      "metadata": {}\n    }\n  },\n  "livemode": false,\n  "pending_webhooks": 1,\n  "request": {\n    "id": "req_123",\n    "idempotency_key": "idempotency-key-123"\n  },\n  "type": "customer.created"\n}\n',
};

/**
 * WeChat Pay API v3's test merchant key and a request signed with it ("请求参数里带Path参数(路径参数)，
 * 如何计算签名": https://pay.weixin.qq.com/docs/partner/development/interface-rules/signature.html ;
 * the body-parameter page, https://pay.weixin.qq.com/docs/partner/development/generate-request-signature-verification/request-body-parameters-signature.html ,
 * uses the same key, merchant and serial for its JSAPI order).
 */
export const WECHAT_TEST_MERCHANT = {
  mchId: '1900007291',
  serialNo: '408B07E79B8269FEC3D5D3E6AB8ED163A6A380DB',
  privateKey: `-----BEGIN PRIVATE KEY-----
MIIEvAIBADANBgkqhkiG9w0BAQEFAASCBKYwggSiAgEAAoIBAQCm2mb6q8gMKH/3
CNTbpJAIrbqiBiQGEOtjGcBrDYltsGynWgNscqT7WvfzU14FQbYcQUC5T4Wvva7m
i3fIp3OgX8VqMDNA0qebnr38Pe6kqiLyZgFpJPXlSKDyPyqhRbVTbXssvSMQeVKc
dXeVxoNNeoOlNFHgF/P0io6AmAVnz+hN8SiZKuOsth5/zUTLGvtkgxBcQooQrtXh
RcpLT798OyIb9xeJ2HO3xRtMv2+perEzb4gMibI74UBz+2QEbnkubPE+2jU2rRZu
dnNEz/BPOt3Qj/w2V6/G0VumGDh6+UeMU0jv4aupHztWITC4Akn0l7lBCNy3lgl8
VFaJnkIxAgMBAAECggEAYGL8aESB7NwciDWW2UdoWUsa7GxFtSdjAz2mFXGdeTsY
mVh7b9OOkRGM+Qio4LqEHDBp1mMk5E/cUJwy1zw8pGGO5nfvs7u9TT3XnHaefIs4
YvUgTYAneIuLRkXNN5rQU+CD7mVYczTSz0Vgjqo9wa1LjUz7G0xbBmJgTdMEFGJs
eJjy6AbJo0CGIwp6HJbTm4CmOUgXnnDAIbEGTIRImkZFH/rzneIeR7oZ77FVwxr1
CZB2gfRCov/yRPbw8vnryYkmvQ7D/ze3j5097vRg/MoDGBSdoOwcmo75vyofr0AS
zytMjmHYyifqkf5slPropSiJeGf4p/7gtKyF6dE/XQKBgQDVAlJ+4U5ZVGOuDc3+
sAhz8CTzgFNlq9vKuSoFK6hOz2L+cwj+E7NXGkOe2DsHHZNy2Xqxk7caKhPEp1z9
hhpMpyLVMoFt6CKemyoRBWDCQwLLwem9SZF/IAyovBkLiH36P42Jm26gUkNMKC/5
Zhtqxf6RZgRQzbVudJi47vIRCwKBgQDIh0+v27Oo+DM3fhObH4I1NrXpWOEGH7OQ
G1dEsMuFYF4hjGhg0kBEP3w9vVdl2+mRllZKTsx9oqjb8OibPLLIH8xsdbAB0WLf
JvjLu4wl/ILUzN1RI03dWnnv2EnEeQn6c3hizvrJ9wR5U4ue9RPVnQooJ0hZF1PU
uCL5fWK3MwKBgElReU/PAYbh80WP3t3Rfbdaa32dKBeQ5iCLR5lsA4zM+YgX1HqQ
EWTj126vgvHaDkyz6vWAoL/Sx+cirHFfXWIRDX5Q2hgYlQH+6qXdMgbrxeSYpHnQ
/tHBGFpkFELSAnrGsVMyOwvYBO4LzyeLK9i+ufcWJFoj1FVmsMLHDG8tAoGARdbi
iQQCoYG4DMarO2aQ6cmhN6EN1h0qY7EyBqlwaIZ0okiNfdMcMOjPc41DKCWcRmlO
qlihXcxN9TQFPzO3rH1urAOdBjUPs1qWYhZyrDQyuLyVBBJApyxAtajloDjrob+f
mQIvVDHk7ACN6xG+E7K6+9salnTKbJapD618uQMCgYBNy6XUvzLkP/A1U/UZdtcx
l8GwU/dturLxz4CyGbqDw4ubaYY2e13lnqHUqQgPtiSyH51nq3tdo8G0YAJdfkSv
KvnfslW91fyEBUKnkdW1o3/1UFU/wprZ7ixVL/F42A4xDu7OFE8EnweJOZ0jWceE
OdhCkaIGBCfRnlECRK8UyQ==
-----END PRIVATE KEY-----
`,
};

/** The path-parameter page's request: its five-line message and the signature the page shows. */
export const WECHAT_GET_REQUEST = {
  method: 'GET',
  pathAndQuery: '/v3/refund/domestic/refunds/123123123123',
  timestamp: '1554208460',
  nonce: '593BEC0C930BF1AFEB40B4A08C8FB242',
  body: '',
  message: 'GET\n/v3/refund/domestic/refunds/123123123123\n1554208460\n593BEC0C930BF1AFEB40B4A08C8FB242\n\n',
  signature:
    'Lc9VXxmeonkdV8Xk9tmigQFLhl0vRWTerdmoRu01aAnYwIrD/5nsSwE1WlmZGLRlAFTNQ3QsMa0+VRDlJp1Wp5p0nO8EK68b5sJBbjouxaFciIfq1zfDWWz+jqhcMoKXI1A6dPm1AW7D4d30WsMTNzp6g23OXakIsh9LO3lUmwvTuE0BY8ncf6tNGk4wKmvXwERd/ZpoQY3MAVKz+Nakwc+2XBmzT66KcUehU5kr4IvGa/lEU5RZb/q00zP9VLdBhC/jQSX3X1UcJLCtEc4gTmib4tnmAT+bHF/e17ZAuxDNcx6rqT8gNEXqaJGG+1OflMSTU2tpyG65G4dMKdFcoA==',
};

/** The body-parameter page's JSAPI order: the body sent and the five-line message it shows. */
export const WECHAT_POST_REQUEST = {
  method: 'POST',
  pathAndQuery: '/v3/pay/transactions/jsapi',
  timestamp: '1554208460',
  nonce: '593BEC0C930BF1AFEB40B4A08C8FB242',
  body: '{"appid":"wxd678efh567hg6787","mchid":"1900007291","description":"Image形象店-深圳腾大-QQ公仔","out_trade_no":"1217752501201407033233368018","notify_url":"https://www.weixin.qq.com/wxpay/pay.php","amount":{"total":100,"currency":"CNY"},"payer":{"openid":"oUpF8uMuAJO_M2pxb1Q9zNjWeS6o"}}',
  message:
    'POST\n/v3/pay/transactions/jsapi\n1554208460\n593BEC0C930BF1AFEB40B4A08C8FB242\n{"appid":"wxd678efh567hg6787","mchid":"1900007291","description":"Image形象店-深圳腾大-QQ公仔","out_trade_no":"1217752501201407033233368018","notify_url":"https://www.weixin.qq.com/wxpay/pay.php","amount":{"total":100,"currency":"CNY"},"payer":{"openid":"oUpF8uMuAJO_M2pxb1Q9zNjWeS6o"}}\n',
};

/**
 * WeChat Pay's example of what a merchant verifies on an answer or a notification: the headers'
 * timestamp and nonce, the raw body, and the three-line message made of them ("如何使用微信支付公钥验签":
 * https://pay.weixin.qq.com/docs/merchant/development/interface-rules/signature-verification.html ).
 * The page's signature is WeChat Pay's own, whose key it does not publish.
 */
export const WECHAT_VERIFIED_MESSAGE = {
  timestamp: '1722850421',
  nonce: 'd824f2e086d3c1df967785d13fcd22ef',
  body: '{"code_url":"weixin://wxpay/bizpayurl?pr=JyC91EIz1"}',
  message: '1722850421\nd824f2e086d3c1df967785d13fcd22ef\n{"code_url":"weixin://wxpay/bizpayurl?pr=JyC91EIz1"}\n',
};

/**
 * AEAD_AES_256_GCM under an APIv3 key, from WeChat Pay's official Java SDK tests:
 * https://github.com/wechatpay-apiv3/wechatpay-java/blob/main/core/src/test/java/com/wechat/pay/java/core/cipher/AeadAesCipherTest.java
 * (the key is API_V3_KEY of .../core/model/TestConfig.java), and that file's platform
 * certificate download, an encrypted resource whose plaintext is the certificate with serial
 * 5DEA10EF55877E3CF6C33255C2E7DEFFF7E427EC.
 */
export const WECHAT_API_V3_KEY = 'a7cde1ZJB1kG2e7VfTs3jQzaWizur8Gb';
export const WECHAT_AEAD_MESSAGE = {
  resource: { algorithm: 'AEAD_AES_256_GCM', associated_data: 'associatedData', nonce: 'uluk4a9R25RW', ciphertext: 'ulwSiIajGClcvcOYvOQ7+l+0PAbzzwI=' },
  plaintext: 'message',
};
export const WECHAT_AEAD_CERTIFICATE = {
  resource: {
    algorithm: 'AEAD_AES_256_GCM',
    associated_data: 'certificate',
    nonce: '14b16c03dc1b',
    ciphertext:
      'Mr/AxbvY+WL9hKlD5nIa03LOMPpn5f+CWeNxE4ujl0f5gXZ9XLJ9CldkArCOTsbU62XgKnTc3YvRMZQ7wCmE2fzwmAenAySTYsPms72JhggPWfdqVxri9YD5wBYKn8Ck0Fc5JIiVw9WlN2oxHBz83mRVsjoTGC5+cX1CdYqKuZ8pkvi0aCJIq07ZC8MHoTowUz+4jYJy9XeKqip83Z7BmUYxsePpNM+HtihBqTJIUYXJfX7Col5X0ACsApRoU9l6swfW/kzvqNpDJavhDBGasLrr5822+Fk5nVkcTi53f8Wbue7ODWjJxj1yhRYcxFCvXLtpYNB+Qa1aXtrBSdBdBI2p7o+6Imn+auHLBCzkrZqF/yd+d4vTn4tqHPLUj89XcHsMf96uBo3T/HQV8LEDeIO+6YvOK9FrIDYsvp+imN4n/mnF7eJKo9mpN/QqWJiawrFpAmMMxFKBjIdpgMnVUl3Z11RcWKyfOJ3kcmItTWcnZFNyDgR9cS0aU6QPlefa3uUW89uzBuHjcFdDl43yU3LE4qZnHLDcDgx4qt0OFCLiy51GXtEpyYs5k99YJBvKK+RyIs4Yc1/smBmClQUhxW+8bsPNOcXfDvH2yX4YzESoO4TV0RqiCgnsSd4zIFyJPiMKIGzVHiw6Kg0eGCmB4mGHEEZCQ0eN3SSPO0QVjjtBYfgXDZfVHSaAB8PjWBVNFimoViZZQrwT6Ygo0LU0Dd8+F5aHFYr4OPHPslr3hrgutEYXDTv1vTA6ABJGqknJ9Y2vtyWpy7aIwxc0kQq/1ezjs+RMVL/LRpGDnbx1/CGPDjZhYgZypKa55+PDhoaQxqkF3xCLz2DGoNHZYmFqxzAOsAK0vJZw4VcAk6ssbA6YIaMuiemEpxfLC9ZiXtRqsX9s+GWjjtA8JywOFMO+NKZm9BH/E5YNg2DDD3sHG9Mciwn7yJ6sdf8h2lAWlEExAOeiBNyshOHAQ0/S+x1ncWNiqY+Uh5n0rtonvePV2MsxVlEWR3AVHn1abcEWkzivd+G5kg7LYO0goqzGClcQfnFfZdO6KwcMXsBCnm9A1Bl4+k5LLokTIYH5/36SRIZ9j0CHGD77BQLE7x8AlNsoFS2m263tLLq78TFqvZUTIZIQcVIl+NInscS3xQbA38qqFqutCWIwoF1azuJ7woiJyMvnS3xzIpNzP+rzJ8VDXxjLjpEUBOC9WDs74+QMtsAdmh6g0KDclHEk8WJ4P2bnso4z3VCGoDT5X/0bS1C+jMZMKaOCNB21FZ08qgUHmKeDeg8ylENu+mh2Y/AaEDSGkGBHIfFbhMYO3uRxhk9hldiHEnHgdkXiVAAUWk/IhtmGijibO/L76vB74Xpes973uK+2iFKgNBk8qTLLZZnuWbcMQuA6VsFULRb/C+q9B21YuAWPMzvgBwr4EX2m/OpF5w8Q0HL7v1H5H0mIGJbrjnklUPoBYrw30W3uk7yF0KE6sfMukafFx0S9rBOL0RykGDPwC0lHSNySkXDeM5XvDJ+dtHK+RDwhJR+azfrWAHGMtZcQ+YVamjWVmHxXM03j3GeCXgqae1upwHzkPL5OwojcQ5MQi3Kv/1xtwY0cRN/yeZTOsXfujtqhkJj/Vltby4lnW4SCj4LjWQF19BY6zhzF4yybBA8bhhtoNP/zx8QkhHAkIROkK2ZVgfocCAPvfQ+vSrsIBO+L5cmg6mzFn4g84lsHscgXnszIlzUrzx/4Tam0uwuS9J1gddZ0I0QUt9SJzfsoBCTU0OgNMUtXKS5HvgXe7abexMtFH5eulOsAuFZkQ5LYJa/m4yHFInXzL/t3hjdTi2NmxUufvYzwIyffRTu5vS9vjscARD9lUQDHFQ/xgWe1i8EkRlrSfjlXt00+4//h2bcJKyTBT3IXwvKNsuY29V9/vU3HkvWKZ99zpSlmcZRuBa1BHbyPEvc0NlqIIoKidxqUvOR64MzudHhAjgWFP+IXojfhS3Gj9OJhBL7s',
  },
  serialNumber: '5DEA10EF55877E3CF6C33255C2E7DEFFF7E427EC',
};

/**
 * Alipay's example of the string an OpenAPI request signs ("自行实现签名", How to sign without the
 * SDK: https://opendocs.alipay.com/common/02kf5q ): every parameter but sign, sorted, key=value
 * joined by &, values as they are (not URL-encoded).
 */
export const ALIPAY_REQUEST = {
  params: {
    app_id: '2014072300007148',
    method: 'alipay.mobile.public.menu.add',
    charset: 'GBK',
    sign_type: 'RSA2',
    timestamp: '2014-07-24 03:07:50',
    biz_content:
      '{"button":[{"actionParam":"ZFB_HFCZ","actionType":"out","name":"话费充值"},{"name":"查询","subButton":[{"actionParam":"ZFB_YECX","actionType":"out","name":"余额查询"},{"actionParam":"ZFB_LLCX","actionType":"out","name":"流量查询"},{"actionParam":"ZFB_HFCX","actionType":"out","name":"话费查询"}]},{"actionParam":"http://m.alipay.com","actionType":"link","name":"最新优惠"}]}',
    version: '1.0',
  },
  signingString:
    'app_id=2014072300007148&biz_content={"button":[{"actionParam":"ZFB_HFCZ","actionType":"out","name":"话费充值"},{"name":"查询","subButton":[{"actionParam":"ZFB_YECX","actionType":"out","name":"余额查询"},{"actionParam":"ZFB_LLCX","actionType":"out","name":"流量查询"},{"actionParam":"ZFB_HFCX","actionType":"out","name":"话费查询"}]},{"actionParam":"http://m.alipay.com","actionType":"link","name":"最新优惠"}]}&charset=GBK&method=alipay.mobile.public.menu.add&sign_type=RSA2&timestamp=2014-07-24 03:07:50&version=1.0',
};

/**
 * A trade notification as Alipay sent and signed it (RSA2 over the sorted parameters without sign
 * and sign_type), with Alipay's public key for it, from Alipay's official Node SDK tests
 * ("verify sign should delete sign_type"):
 * https://github.com/alipay/alipay-sdk-nodejs-all/blob/master/test/alipay.test.ts
 * fund_bill_list is the JSON text Alipay posts (the SDK's test holds it parsed).
 */
export const ALIPAY_NOTIFY_PUBLIC_KEY = `-----BEGIN PUBLIC KEY-----
MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEAqObrdC7hrgAVM98tK0nv
3hSQRGGKT4lBsQjHiGjeYZjOPIPHR5knm2jnnz/YGIXIofVHkA/tAlBAd5DrY7Yp
vI4tP5EONLtZKC2ghBMx7McI2wRD0xiqzxOQr1FuhZGJ8/AUokBzJrzY+aGX2xcO
rxFYRlFilvVLTXg4LWjR1tdPkO6+i7wQZAIVMClPkwVRZEbaERRHlKqTzv2gGv5r
DU8gRoe1LeaN+6BlbTqHWkQcNCUNrA8C6l17XAXGKDsm/9TFWwO8EPHHHCaQdjtV
5/FdcWIt+L8SR1ss7EXTjYDFtxcKVv9rEoY1lX8T4mX+GbXfZHraG5NCF1+XioL5
JwIDAQAB
-----END PUBLIC KEY-----
`;
export const ALIPAY_NOTIFICATION: Record<string, string> = {
  gmt_create: '2019-08-15 15:56:22',
  charset: 'utf-8',
  seller_email: 'z97-yuquerevenue@service.aliyun.com',
  subject: '语雀空间 500人规模',
  sign: 'QfTb8tqE1BMhS5qAnXtvsF3/jBkEvu9q9en0pdbBUDDjvKycZhQb7h8GDs4FKfi049PynaNuatxSgLb/nLWZpXyyh0LEWdK2S6Ri7nPwrVgOs08zugLO20vOQz44y3ti2Ncm8/wZts1Fr2gZ7pShnVX3d1B50hbsXnObT1r/U8ONNQjWXd0HIul4TG+Q3fm3svmSvFEy0WnzuhcyHPX5Gm4ELNctL6Qd5YniGJFNcc7kopHYtI/XD9YCKCH6Ct02rzUs9i11C9CsadtZn+WhxF26Dqt9sGEFajkJ8cxUTLi8+VCpLHsgPE8P0y095uQcDdK0YjCh4x7wVSov+lrmOQ==',
  buyer_id: '2088102534368455',
  invoice_amount: '0.10',
  notify_id: '2019081500222155624068450559358070',
  fund_bill_list: '[{"amount":"0.10","fundChannel":"ALIPAYACCOUNT"}]',
  notify_type: 'trade_status_sync',
  trade_status: 'TRADE_SUCCESS',
  receipt_amount: '0.10',
  buyer_pay_amount: '0.10',
  sign_type: 'RSA2',
  app_id: '2019073166072302',
  seller_id: '2088531891668739',
  gmt_payment: '2019-08-15 15:56:24',
  notify_time: '2019-08-15 15:56:25',
  version: '1.0',
  out_trade_no: '20190815155618536-564-57',
  total_amount: '0.10',
  trade_no: '2019081522001468450512505578',
  auth_app_id: '2019073166072302',
  buyer_logon_id: 'xud***@126.com',
  point_amount: '0.00',
};
