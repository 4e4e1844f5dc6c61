import type { BounceCategory } from './categories.js';

/**
 * What servers say, by category: the texts of replies and bounce messages that name a cause, the
 * way Sisimai's reason modules read them. Matched against the diagnostic lowercased, with runs of
 * white space made one space (see `normalise` in classify.ts). Every pattern is linear (no nested
 * quantifiers), so a hostile diagnostic costs time proportional to its length, which is bounded.
 *
 * Order matters: the first category whose phrases match wins. Specific causes come before the
 * general ones that often appear in the same reply ("mailbox full" before "rejected", "DMARC"
 * before "policy"), and the address phrases (user unknown) come after the causes that servers
 * put next to a recipient address.
 */
export interface PhraseRule {
  readonly category: BounceCategory;
  /** Where the phrases come from, for the reader of this table. */
  readonly source: string;
  readonly pattern: RegExp;
}

export function rule(category: BounceCategory, source: string, phrases: readonly string[]): PhraseRule {
  return { category, source, pattern: new RegExp(phrases.join('|')) };
}

/** The category of the first rule whose phrases occur in a normalised text, or null. */
export function firstCategory(rules: readonly PhraseRule[], text: string): BounceCategory | null {
  return rules.find((candidate) => candidate.pattern.test(text))?.category ?? null;
}

/**
 * Texts that say a mailbox does not exist in words only a recipient check produces, each from a
 * known system: they prove the address bad wherever in the session they come.
 */
export const VENDOR_ADDRESS_PHRASES = rule(
  'user_unknown',
  'replies of known systems to an unknown recipient',
  [
    // Postfix: "Recipient address rejected: User unknown in local recipient table" (only at RCPT)
    String.raw`user unknown in (?:local recipient|virtual mailbox|virtual alias|relay recipient) table`,
    // Exchange 2003 to Exchange Online
    String.raw`recip(?:ient)?notfound`,
    String.raw`the recipient name is not recognized`,
    // Outlook.com refuses an address it does not have with RFC 5321's own words
    String.raw`^550[ -](?:5\.\d\.\d+ )?requested action not taken: mailbox unavailable`,
    // Yahoo answers after DATA, for every unknown recipient, with its "dd" code
    String.raw`delivery error: dd this user doesn't have an? \S+ account`,
    // Gmail's newer notices; IMail's own; InterScan MSS; Verizon's MMS gateway
    String.raw`because the address couldn't be found`,
    String.raw`^unknown user: \S+@`,
    String.raw`invalid final delivery userid`,
    String.raw`unable to deliver message to <[^>]+> \(and other recipients in the same domain\)`,
    String.raw`no valid recipients for this mm`,
    // au (KDDI) names the address it does not have, and answers ": User unknown" for its filters
    String.raw`550:? <[^>]+@(?:[\w-]+\.)*(?:ezweb\.ne\.jp|au\.com|auone-net\.jp)>: (?:user unknown|recipient address rejected)`,
    // Domino and Lotus Notes, English and Japanese
    String.raw`not listed in (?:domino directory|public name & address book)`,
    String.raw`ディレクトリのリストにありません`,
    String.raw`domino ディレクトリには見つかりません`,
    // qmail-ldap's chkusr; Apple iCloud ("unknown or illegal alias", deleted accounts as "inactive")
    String.raw`no mailbox here by that name`,
    String.raw`unknown or illegal alias`,
    String.raw`inactive email address`,
    // Orange, La Poste
    String.raw`destinataire invalide`,
    // sendmail's local mailer, for a local user the system does not have
    String.raw`mail\.local: unknown user`,
  ],
);

/**
 * Texts that say a mailbox does not exist in words any server may use, including filters that
 * answer "User unknown" to mail they refuse: hard only in the right context (classify.ts).
 */
export const ADDRESS_PHRASES = rule('user_unknown', 'RFC 5321 replies and every MTA', [
  String.raw`\buser unknown`,
  String.raw`\bunknown (?:local[- ]part|local user|user|recipient|mailbox|address|addressee)`,
  String.raw`\baddressee unknown`,
  String.raw`\bno such (?:user|mailbox|recipient|address|account|person|local user)`,
  String.raw`\b(?:user|recipient|mailbox|account|address|addressee)(?: address)? (?:does not|doesn't|doesnt|did not|does no longer) exist`,
  String.raw`\b(?:user|recipient|mailbox|account)(?: address)? not (?:found|exist|known|listed|valid)`,
  String.raw`\bnot (?:a valid|an existing) (?:user|recipient|mailbox|address)`,
  String.raw`\binvalid (?:recipient|mailbox|destination address|user\b)`,
  String.raw`\bbad destination mailbox`,
  String.raw`recipient address rejected(?:: (?:undeliverable address|unknown user))?\.?$`,
  String.raw`email account that you tried to reach does not exist`,
  String.raw`requested action not taken: mailbox unavailable`,
  String.raw`#?5\.1\.0 address rejected`,
  String.raw`no valid recipients`,
]);

/** In the order they are tried; ADDRESS_PHRASES sits between the specific and the general. */
export const CAUSE_RULES_FIRST: readonly PhraseRule[] = [
  rule('system_error', 'local delivery agents that failed, whatever the reason they print', [
    String.raw`\bprocmail\b`,
    String.raw`\bmaildrop\b`,
  ]),
  rule('mailbox_full', 'RFC 3463 X.2.2 texts, Dovecot, Courier, Exchange, Gmail, Yahoo, au/KDDI', [
    String.raw`mail ?box (?:is )?full`,
    String.raw`mail ?box (?:has )?(?:exceeded|reached|is over)`,
    String.raw`(?:mail ?box|mail ?folder|inbox|account|storage) (?:is )?(?:full|out of storage)`,
    String.raw`over ?quota`,
    String.raw`(?:disk|storage|mailbox|mail)?\s?quota (?:exceeded|full|violation)`,
    String.raw`exceeded (?:the |his |her |their )?(?:storage|quota|mailbox)`,
    String.raw`exceeds? (?:the |his |her |their )?(?:storage|quota|mailbox size)`,
    String.raw`out of storage space`,
    String.raw`insufficient (?:user )?(?:mailbox|quota)`,
    String.raw`number of messages in recipient's mailbox exceeded`,
    String.raw`mailbox ?full`,
    String.raw`quotaexceeded`,
    String.raw`mail ?box exceeds (?:the )?(?:allowed|maximum) size`,
  ]),
  rule('message_too_big', 'RFC 3463 X.2.3/X.3.4 texts, Exchange RecipSizeLimit, 1&1', [
    String.raw`message (?:size|length) exceeds`,
    String.raw`message (?:is )?too (?:large|big)`,
    String.raw`(?:mail|message) size limit`,
    String.raw`size (?:limit )?exceeded`,
    String.raw`exceeds (?:the )?(?:maximum|fixed maximum|local|allowed) (?:message )?size`,
    String.raw`too large for this recipient`,
    String.raw`recipsizelimit`,
  ]),
  rule('suspended', 'Gmail DisabledUser, Yahoo, i.ua, Orange, RFC 3463 X.7.13', [
    String.raw`(?:account|mailbox|address) (?:has been |is )?(?:disabled|suspended|deactivated|frozen|discontinued)`,
    String.raw`email account that you tried to reach is (?:disabled|inactive)`,
    String.raw`disabled (?:recipient|mailbox|account)`,
    String.raw`(?:user|account|mailbox) [^ ]+ temporary locked`,
    // Postfix's "delivery temporarily suspended" is about the destination host, not the mailbox
    String.raw`(?<!delivery )temporarily (?:locked|disabled|suspended)`,
    String.raw`recipient account is blocked`,
    String.raw`compte du destinataire est bloque`,
    String.raw`(?:mailbox|account) (?:is )?(?:inactive|locked)`,
  ]),
  rule('has_moved', 'RFC 5321 551, RFC 3463 X.1.6, Apple', [
    String.raw`no longer on (?:this )?server`,
    String.raw`\bhas moved\b`,
    String.raw`^551 not our (?:user|customer)`,
    String.raw`mailbox owner has changed`,
  ]),
  rule('rejected', 'open-relay refusals: Postfix, sendmail, Exim, Amazon SES sandbox', [
    String.raw`relay(?:ing)? (?:access )?(?:denied|not permitted|prohibited|not allowed)`,
    String.raw`not (?:permitted|allowed|configured) to relay`,
    String.raw`unable to relay`,
    String.raw`we do not relay`,
    String.raw`email address is not verified`,
  ]),
  // Google Workspace groups give a spam verdict, then advise SPF records.
  rule('spam', 'Google Workspace groups', [String.raw`rejected due to spam classification`]),
  rule('auth_failure', 'SPF, DKIM and DMARC refusals: Gmail, Microsoft, Yahoo, Apple, Mail.ru, QQ', [
    String.raw`\bdmarc\b`,
    String.raw`\bspf\b(?: \w+){0,4} (?:fail|check|record|validation|polic)`,
    String.raw`\bdkim\b(?: \w+){0,3} (?:fail|invalid|signature)`,
    String.raw`unauthenticated (?:email|mail|senders?|messages?)`,
    String.raw`sender is unauthenticated`,
    String.raw`does not have authentication information`,
    String.raw`fails to pass (?:spf|dkim|authentication)`,
    String.raw`multiple authentication checks failed`,
    String.raw`authentication (?:is )?required`,
    String.raw`authrequired`,
    String.raw`smtp authentication`,
    String.raw`is not allowed to send from`,
  ]),
  // Before the blocklists: it says "they may be blacklisted" only as one guess among others.
  rule('host_unknown', "Exim's cannot_route_message as cPanel words it (Exim's own: Unrouteable address)", [
    String.raw`the account or domain may not exist, they may be blacklisted`,
  ]),
];

export const CAUSE_RULES_AFTER_ADDRESS: readonly PhraseRule[] = [
  rule('rejected', 'recipient filters and sender refusals: Facebook, Google Groups, mailing lists', [
    String.raw`recipient preferences`,
    String.raw`message filtered`,
    // not Gmail's "it was rejected by the recipient domain", its preamble to the reply it quotes
    String.raw`(?:rejected|blocked|refused) by (?:the )?recipient(?! domain)`,
    String.raw`domain filter`,
    String.raw`not a member of`,
    String.raw`(?:group|list) you tried to contact`,
    String.raw`(?:do not|don't) have permission to post`,
    String.raw`グループにメッセージを投稿する権限がない`,
    String.raw`sender (?:address |domain )?(?:rejected|refused|denied|not allowed|verify failed)`,
    String.raw`domain of sender address [^ ]+ does not exist`,
    String.raw`unroutable sender address`,
    String.raw`from: domain is invalid`,
    String.raw`purported responsible address`,
    String.raw`address that has been blacklisted`,
    // Exchange Online at DATA, when it refused every recipient
    String.raw`all recipient addresses rejected`,
  ]),
  rule('spam', 'URI blocklists (URIBL, SURBL): they list the links in the message, not the sender', [
    String.raw`blacklisted (?:url|uri|link)`,
    String.raw`\buribl\b`,
    String.raw`\bsurbl\b`,
  ]),
  rule('blocked', 'missing or mismatched reverse DNS: Gmail 5.7.25, Comcast, Outlook.com, Postfix', [
    String.raw`reverse dns`,
    String.raw`\brdns\b`,
    String.raw`\bptr\b`,
    String.raw`ip name lookup failed`,
    String.raw`cannot find your hostname`,
    String.raw`may not be mail exchanger`,
    String.raw`mismatches client ip`,
  ]),
  rule(
    'blocked',
    'reputation and DNS blocklists: Spamhaus, Spamcop, SORBS, Proofpoint, Microsoft, Cloudmark',
    [
      String.raw`blocked using`,
      String.raw`\bblack ?list(?:ed)?\b`,
      String.raw`\bblock ?list(?:ed)?\b`,
      String.raw`\b(?:dnsbl|rbl|spamhaus|spamcop|sorbs|cloudmark)\b`,
      String.raw`banned sending ip`,
      String.raw`(?:client|sending) (?:host|ip)(?: address)? (?:rejected|blocked|refused|banned)`,
      String.raw`client host blocked`,
      String.raw`\bip (?:address )?(?:is )?(?:blocked|blacklisted|banned|listed)`,
      String.raw`reputation`,
      String.raw`blocked for abuse`,
      String.raw`use the smtp server of your isp`,
      String.raw`dynamic (?:ip|address)`,
      String.raw`ip source bloquee`,
      String.raw`messages from [^ ]+ weren't sent`,
    ],
  ),
  rule(
    'host_unknown',
    'no such domain, no MX, null MX (RFC 7505): Postfix, Exim, sendmail, Gmail, Outlook.com',
    [
      String.raw`host or domain name not found`,
      String.raw`\bhost [^ ]+ not found`,
      String.raw`\bhost unknown`,
      String.raw`unknown host`,
      String.raw`(?:domain|host) (?:name )?(?:does not|doesn't) exist`,
      String.raw`no such domain`,
      String.raw`domain (?:name )?not found`,
      String.raw`domain is not reachable`,
      String.raw`domain \S+ couldn't be found`,
      String.raw`no mx (?:record )?(?:found|for)`,
      String.raw`^\d{3} [a-z0-9-]+(?:\.[a-z0-9-]+)+ does not exist`,
      String.raw`unrouteable address`,
      String.raw`invalid domain\b(?! name)`,
      String.raw`null mx`,
      String.raw`(?:does not|doesn't) (?:accept|receive) (?:e-?mail|mail)`,
      String.raw`no smtp service`,
    ],
  ),
];

export const CAUSE_RULES_LAST: readonly PhraseRule[] = [
  // Gmail's refusal of a malformed message goes on to say that the check reduces spam.
  rule('policy', 'Gmail: messages not compliant with RFC 5322', [String.raw`not rfc ?5322 compliant`]),
  rule('spam', 'content filters: amavis, Barracuda, SpamAssassin, Gmail, Zoho, Orange', [
    String.raw`\bspam\b`,
    String.raw`\bube\b`,
    String.raw`unsolicited`,
    String.raw`message content rejected`,
    String.raw`mail rejete`,
  ]),
  rule('rate_limited', 'throttling: Gmail, Yahoo, QQ, GoDaddy, Postfix anvil', [
    String.raw`too many (?:connections|recipients|messages|mails|concurrent)`,
    String.raw`rate (?:limit|that prevents)`,
    String.raw`rate[- ]limited`,
    String.raw`frequency limited`,
    String.raw`throttl`,
    String.raw`(?:unexpected|excessive) volume`,
    String.raw`relay quota`,
  ]),
  rule('virus', 'virus scanners', [String.raw`\bvirus`, String.raw`\bmalware\b`, String.raw`\binfected\b`]),
  rule('policy', 'content and policy refusals: Gmail, Yahoo, Mimecast, RFC 5322 checks', [
    String.raw`polic(?:y|ies)`,
    String.raw`protocol violation`,
    String.raw`header error`,
    String.raw`headers? too (?:large|long|many)`,
    String.raw`duplicate header`,
    String.raw`8-bit data`,
    String.raw`rfc ?5322`,
    String.raw`multiple addresses in from`,
    String.raw`message not allowed`,
    String.raw`network not allowed`,
    String.raw`content presents a potential`,
  ]),
  rule('expired', 'queue lifetime reached: Exim, sendmail, Exchange, Amazon SES, OpenSMTPD', [
    String.raw`retry time(?:out)? (?:not reached|exceeded)`,
    String.raw`all hosts have been failing for a long time`,
    String.raw`message expired`,
    String.raw`queue\.expired`,
    String.raw`(?:too long|timeout) in (?:the )?queue`,
    String.raw`unable to deliver in \d+ minutes`,
    String.raw`could not be delivered (?:for|within) \d+`,
    String.raw`cannot send message for \d+`,
    String.raw`delivery (?:time|period) (?:has )?expired`,
    String.raw`envelope expired`,
    String.raw`could not deliver for the last \d+`,
    String.raw`after (?:multiple|repeated) (?:retries|attempts), giving up`,
    String.raw`was aborted after \d`,
    String.raw`not delivered within \d+ days`,
  ]),
  rule('network_error', 'connections and DNS: Postfix, Exim, sendmail, Gmail, Domino', [
    String.raw`timed out`,
    String.raw`connection (?:refused|reset|closed|dropped)`,
    String.raw`lost connection`,
    String.raw`(?:network|host) (?:is )?unreachable`,
    String.raw`no route to host`,
    String.raw`could not connect`,
    String.raw`network error on destination`,
    String.raw`unable to connect`,
    String.raw`requests to connect`,
    String.raw`name service error`,
    String.raw`dns (?:error|query|lookup)`,
    String.raw`routing loop`,
    String.raw`too many hops`,
    String.raw`hop count exceeded`,
    String.raw`mail loop`,
  ]),
  rule('system_error', 'the receiving system failed: local delivery agents, overloaded or broken servers', [
    String.raw`system error`,
    String.raw`internal (?:server |system )?error`,
    String.raw`service (?:currently |temporarily )?(?:unavailable|refused|not available)`,
    String.raw`service refuse`,
    String.raw`transaction failed`,
    String.raw`temporary (?:failure|error|local problem)`,
    String.raw`local (?:configuration )?error`,
    String.raw`insufficient (?:system )?(?:disk space|storage)`,
    String.raw`system (?:is )?full`,
    String.raw`mailer error`,
    String.raw`could not load`,
    String.raw`upstream error`,
    String.raw`not accepting (?:connections|messages)`,
    String.raw`loop (?:alert|detected)`,
    String.raw`duplicated message-id`,
  ]),
];
