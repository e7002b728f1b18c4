"""Word lists and patterns the statement rules read. Pure data.

Every pattern runs on the canonical form of a clause (lower case, contractions expanded,
see :func:`quipu.extraction.rules.canonical`), except where a rule says otherwise.
"""

from __future__ import annotations

import re

ADV = (
    r"(?:\s+(?:really|also|absolutely|totally|just|genuinely|honestly|actually|still|definitely"
    r"|truly|kind of|sort of|pretty much|literally|seriously|personally|currently|now|only"
    r"|generally|mostly|do|recently|finally|already|even|much|strongly|secretly|low key))*"
)
DEICTIC = re.compile(
    r"^(?:it|this|that|them|these|those|him|her|you|your\b.*|that you\b.*|it when\b.*"
    r"|this one|that one|both|all of (?:it|them)|so|too|a lot|lots|more|some|one|any)$"
)
TRANSIENT_STATES = re.compile(
    r"^(?:so |very |a bit |a little |kind of |really |super |pretty |quite |too |not )*"
    r"(?:tired|exhausted|hungry|thirsty|bored|busy|sick|ill|sorry|sure|unsure|fine|ok|okay|good"
    r"|great|happy|sad|glad|excited|nervous|anxious|stressed|confused|curious|lost|stuck|late"
    r"|early|back|here|there|done|ready|free|awake|asleep|online|offline"
    r"|new here|joking|kidding|serious|right|wrong|aware|afraid|worried|annoyed|frustrated"
    r"|upset|angry|impressed|interested|thinking|wondering|trying|looking|just looking"
    r"|in a (?:good|bad|great) mood|on (?:my|the) way|about to|going to|not sure|all set)\b"
)
DURABLE_STATES = re.compile(
    r"^(?:not )?(?:recently |newly |happily |now )?(?:(?:a |an )?(?:vegetarian|vegan|pescatarian"
    r"|married|single|divorced|engaged"
    r"|widowed|pregnant|retired|diabetic|celiac|coeliac|left[- ]handed|right[- ]handed"
    r"|colou?r ?blind|deaf|blind|bilingual|trilingual|self[- ]employed|unemployed|freelance"
    r"|introvert|extrovert|morning person|night owl|sober|asthmatic|autistic|dyslexic"
    r"|(?:lactose|gluten) intolerant|allergic to .+|intolerant to .+|originally from .+"
    r"|from .+|based (?:in|out of) .+|\d{1,3}(?: years old| yo)?|\d{1,3} and .+"
    r"|half .+|fluent in .+|a (?:native|fluent) .+ speaker|a native of .+))$"
)
ROLE_EXCLUDED = re.compile(
    r"^(?:a |an |the )(?:bit|little|lot|mess|wreck|total|complete|real|huge|big|massive"
    r"|quick|question|problem|fan|sucker|beginner at this|noob at this|newbie here"
    r"|fast learner|good|bad|great|terrible|nice|happy|sad|new user)\b"
)
PREF_POSITIVE = (
    r"prefer|like|love|adore|enjoy|am (?:more |much more |way more |a lot more )?into|go for"
    r"|stick to"
    r"|stick with|opt for|am (?:a )?(?:big |huge |massive |real )?fan"
    r" of|am obsessed with|am addicted to|can not live without|am fine with|am ok with"
    r"|am okay with|am happy with|am a sucker for|swear by|would rather|would much rather"
    r"|would prefer|am partial to|am keen on|am a (?:huge |big )?(?:lover|fan) of|dig"
)
PREF_NEGATIVE = (
    r"hate|dislike|detest|loathe|despise|can not stand|can not bear|can not handle|do not like"
    r"|do not love|do not enjoy|do not care (?:for|about|much for)|am not into|am not (?:a )?"
    r"(?:big |huge |real )?fan of|avoid|tend to avoid|am not fond of|could not care less about"
    r"|am not keen on|do not really (?:like|enjoy|care (?:for|about))|can not do|can not eat"
    r"|can not have|can not tolerate|can not drink|try to avoid|always avoid"
)
FEEDBACK_OBJECT = re.compile(
    r"^(?:to )?(?:you|your)\b|^(?:the|this|that|these|those|your|all the|all these|all of"
    r" the|how you|what you|the way you|it when you)\s*(?:\w+ )?(?:answer|answers|idea|ideas"
    r"|suggestion|suggestions|one|ones|advice|help|tips?|recommendations?|sound of|list|response"
    r"|responses|explanation|info|information|breakdown|options?|plan|approach|outline|draft"
    r"|version|example|examples|summary|points?|insights?|thoughts|input|guidance|feedback"
    r"|resources|detail|details|question|questions|format|structure|name|names|title|titles"
    r"|recipe|recipes|itinerary|playlist|song list|selection|choices)\b"
    r"|^(?:the )?(?:idea|sound|look) of\b|^(?:it|that|this) (?:a lot|so much|too)\b"
    r"|^(?:how|that|when|the way|what) (?:it|they|this|that|he|she|you)\b"
)
NEGATIVE_PREF = re.compile(r"^(?:" + PREF_NEGATIVE + r")\b")
CHOICE_VERBS = (
    r"pick|picks|choose|order|take|get|go for|book|sit|fly|drink|eat|buy|use|wear|listen to"
    r"|watch|read|shop|stay|end up|opt for|request|ask for|reach for|grab"
)
PLAN_PROGRESSIVE = (
    r"flying|moving|relocating|traveling|travelling|visiting|leaving|starting|joining|launching"
    r"|getting married|inviting|hosting|throwing|organizing|organising|meeting|switching"
    r"|heading|going|taking|staying|buying|selling|retiring|quitting|applying|interviewing"
    r"|attending|speaking|presenting|celebrating|having|driving|coming|returning|renting"
    r"|signing|running|competing|expecting"
)
STRONG_PLAN = re.compile(
    r"^(?:moving|relocating|getting married|retiring|quitting|inviting|hosting|launching"
    r"|throwing|expecting|selling|buying|switching)\b"
)
ONGOING = (
    r"learning|studying|training|saving|building|writing|renovating|raising|teaching|developing"
    r"|preparing|recovering|working|volunteering|practicing|practising|homeschooling|doing a"
    r"|taking (?:a|an) .+ (?:course|class)|pursuing|majoring|minoring|completing|finishing"
    r"|running (?:a|an|my|our)|migrating|upgrading|rewriting|porting|refactoring|converting"
    r"|moving (?:our|my|the|from)|transitioning|switching (?:our|my|the|from)|rolling out|piloting"
)
ROUTINE_QUANTITY = re.compile(
    r"\b\d+(?:[.,]\d+)?\s*(?:km|k|miles?|mi|times|hours?|hrs?|days?|sessions?|laps|steps|pages"
    r"|books|cups?|meals)\b.*\b(?:a|per|each|every) (?:day|week|month|year|night|morning)\b"
)
EPHEMERAL_ACTION = re.compile(
    r"^(?:grab|get (?:a|some|another) (?:coffee|tea|food|lunch|dinner|drink|snack|break)|take a"
    r" (?:break|nap|shower|walk|look)|go to (?:bed|sleep|the bathroom|the store)|sleep|nap|eat"
    r"|have (?:lunch|dinner|breakfast|a snack)|check|look|see|think|try|test|ask|reply|respond"
    r"|get back|come back|be (?:right )?back|let you know|figure|play around|give it a|google"
    r"|search|restart|reboot|log off|head (?:out|off)|call it (?:a day|a night|quits)|wrap up|read"
    r"|start|continue"
    r"|do (?:it|this|that)|need|have to|keep (?:it|that|this)|copy|paste|send|share|run (?:it|this"
    r"|that)|go (?:now|home)|leave (?:now|soon)|stop|work on (?:it|this|that)|fix|debug|find"
    r"|keep .{0,40} in mind|keep an eye|bear .{0,40} in mind|consider|look into|check out"
    r"|give .{0,30} a (?:try|go|shot)"
    r"|take a look|follow up|keep you posted|definitely|probably|make sure|remember|note|use (?:it"
    r"|this"
    r"|that|these|those|them|your)|go ahead|go over|get started|try out|research|explore|reach out"
    r"|talk to|ask|mention|add|include|write|review|revisit|think about|look at|play with"
    r"|experiment)\b"
)
TIMELY = re.compile(
    r"\b(?:tomorrow|tonight|next|this (?:week|weekend|month|year|summer|winter|spring|fall"
    r"|autumn)|in (?:january|february|march|april|may|june|july|august|september|october"
    r"|november|december|\d+ (?:days|weeks|months)|a (?:week|month|year)|the (?:spring|summer"
    r"|fall|autumn|winter))|on (?:monday|tuesday|wednesday|thursday|friday|saturday|sunday"
    r"|the \d)|soon|later this|(?:january|february|march|april|may|june|july|august|september"
    r"|october|november|december) \d|the \d{1,2}(?:st|nd|rd|th)\b|\d{4}-\d{2}-\d{2}"
    r"|for (?:a |two |three |\d+ )?(?:week|weeks|month|months|year|years)\b|in \d{4}"
    r"|\b(?:january|february|march|april|june|july|august|september|october|november|december)\b"
    r"|\b(?:starting|from|beginning|as of|until) (?:monday|tuesday|wednesday|thursday|friday"
    r"|saturday"
    r"|sunday|tomorrow|next|\d))"
)
GOAL_VERBS = re.compile(
    r"^(?:learn|become|visit|buy|move|start|build|travel|retire|run|get into|get better at"
    r"|improve|lose|gain|save|write|publish|launch|open|switch|change careers|go back to"
    r"|finish|complete|master|study|see|climb|hike)\b"
)
HAVE_EXCLUDED = re.compile(
    r"^(?:a |an |some |few |a few |two |many |more |another |no |any |the )?"
    r"(?:question|questions|problem|problems|issue|issues|idea|ideas|meeting|meetings|call"
    r"|calls|quick|headache|cold|flu|fever|bug|bugs|error|errors|doubt|doubts|feeling|feelings"
    r"|suggestion|request|favor|favour|clue|time|fun|minute|sec|second|moment|look|chance"
    r"|point|concern|concerns|thought|thoughts|follow-up|followup|lunch|dinner|breakfast"
    r"|coffee|great time|good time|bad day|rough|long day|enough|plenty|nothing|something"
    r"|everything|to|been|it|this|that|them|mixed|same|access|trouble|difficulty|the best"
    r"|the worst|a lot of work|work to do|homework|a deadline|an appointment|deadline|bit|little"
    r"|lot of (?:questions|work|time|stuff|things)|better understanding|good understanding|idea)\b"
)
MY_EXCLUDED = re.compile(
    r"^(?:question|problem|issue|point|guess|bad|pleasure|turn|mistake|fault|head|brain"
    r"|answer|last answer|code|computer|laptop|pc|phone|internet|connection|wifi|wi-fi|screen"
    r"|mood|day|week|morning|evening|night|weekend|coffee|lunch|dinner|order|package|battery"
    r"|bio|understanding|excuse|apologies|thoughts|opinion|take|idea|memory|question is"
    r"|browser|app|build|test|tests|script|query|prompt|request|message|email|draft|essay"
    r"|homework|assignment|current task|task|bad luck|luck|hands|eyes|back|legs|stomach)\b"
)
PLAN_NOUNS = (
    r"plan|plans|goal|goals|aim|target|deadline|budget|launch|launch date|release|release date"
    r"|defen[cs]e|due date|kickoff|go-live|move|wedding date|start date|deadline for .+"
)
SCHEDULED = re.compile(
    r"^(?:is|are|was|has been|will be|got|have been) (?:planned|scheduled|set|booked|fixed"
    r"|pencilled|penciled|pushed|moved)\b|^(?:moved|changed|got moved|was moved|was pushed"
    r"|shifted) to\b"
)
WORK_CONTEXT = re.compile(
    r"\b(?:team|company|startup|client|clients|service|services|deploy|deploys|release|releases"
    r"|code|repo|api|database|db|server|servers|backend|frontend|stack|sprint|product|project"
    r"|customers|users|engineering|office|production|prod|staging|ci|pipeline|migrations?"
    r"|kubernetes|aws|gcp|azure|postgres|mysql|python|java|go|rust|typescript|standup|payments?)\b"
)
FAMILY_CONTEXT = re.compile(
    r"\b(?:kid|kids|son|sons|daughter|daughters|baby|twins?|boys|girls|dog|cat|puppy|kitten"
    r"|pet|house|apartment|flat|home|vacation|holiday|holidays|trip|wedding|married|anniversary"
    r"|parents|party|garden|car|adopted|honeymoon|camping|beach|family|husband|wife|partner"
    r"|grandparents|in-laws|nanny|daycare|school)\b"
)
DAY_OR_MONTH = re.compile(
    r"^(?:on |at |in |for |by )?(?:the )?(?:monday|tuesday|wednesday|thursday|friday|saturday"
    r"|sunday|january|february|march|april|may|june|july|august|september|october|november"
    r"|december|\d)"
)
PERFECT = re.compile(
    r"^(?:not |never |already |always |recently |once |ever |finally |now |since |been )*"
    r"(?:\w+ed|heard|seen|been|done|gotten|got|read|had|made|found|known|taken|given|gone|come"
    r"|run|written|eaten|drunk|worn|bought|thought|felt|kept|left|lost|met|paid|said|sent|spent"
    r"|told|won|built|begun|become|chosen|drawn|driven|fallen|flown|forgotten|grown|hidden|held"
    r"|learnt|meant|ridden|rung|risen|seen|shown|sung|sat|slept|spoken|stood|stuck|swum|taught"
    r"|thrown|understood|woken|burnt|dealt|dreamt|fed|fought|hung|laid|lent|lit|put|set|shut"
    r"|spread|struck|swept|wound|quit|cut|hit|let|hurt|cost|not)\b"
)
ABSOLUTE_DATE = re.compile(
    r"\b(?:(?:january|february|march|april|may|june|july|august|september|october|november"
    r"|december|jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec)\.? \d{1,2}(?:st|nd|rd|th)?\b"
    r"|\d{1,2}(?:st|nd|rd|th)? (?:of )?(?:january|february|march|april|may|june|july|august"
    r"|september|october|november|december)\b|\d{4}-\d{2}-\d{2}|on the \d{1,2}(?:st|nd|rd|th)\b"
    r"|on (?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)\b(?!s))"
)
HABITUAL = re.compile(
    r"\b(?:every (?:day|morning|evening|night|week|weekend|month|year|other \w+|single \w+"
    r"|monday|tuesday|wednesday|thursday|friday|saturday|sunday|\w+day)|each (?:day|week|month"
    r"|morning)|daily|weekly|monthly|nightly|on (?:weekends|weekdays|(?:monday|tuesday|wednesday"
    r"|thursday|friday|saturday|sunday)s)|(?:once|twice|\d+ times|three times|four times) (?:a|per)"
    r" (?:day|week|month|year))\b"
)
EVALUATIVE = re.compile(
    r"^(?:not )?(?:a bit|a little|kind of|sort of|pretty|so|too|very|quite|rather|super|different"
    r"|similar|the same|better|worse|good|great|bad|nice|fine|okay|ok|amazing|awesome|terrible"
    r"|perfect|easy|hard|difficult|interesting|boring|weird|strange|funny|cool|annoying|tough"
    r"|crazy|insane|busy|packed|hectic|messy|important|key|essential)\b"
)
NOT_NAMES = frozenset(
    [
        "this",
        "that",
        "it",
        "he",
        "she",
        "they",
        "there",
        "here",
        "what",
        "which",
        "who",
        "below",
        "above",
        "attached",
        "following",
        "today",
        "tomorrow",
        "yesterday",
        "everything",
        "nothing",
        "something",
        "everyone",
        "someone",
        "anyone",
        "ok",
        "okay",
        "so",
        "and",
        "but",
        "also",
        "then",
        "now",
        "well",
        "yes",
        "no",
        "the",
        "a",
        "an",
    ]
)
DIRECTIVE_START = re.compile(
    r"^(?:please |pls |and |also |just |kindly )*(?P<neg>do not|don't|never|stop|avoid|no more)?\s*"
    r"(?P<verb>always|never|use|keep|make|write|answer|respond|reply|show|give|format|address|call"
    r"|remind|include|add|put|assume|stick to|default to|prefer|avoid|mention|schedule|book|send"
    r"|talk|speak|explain|use|round|convert|list|sign|spell|refer to|be|suggesting|recommending"
    r"|mentioning|using|sending|adding|including|asking|suggest|recommend)\b",
)
PERSISTENT = re.compile(
    r"\b(?:always|never|from now on|going forward|in (?:the )?future|by default|every time|whenever"
    r"|each time|for me|anymore|any more)\b"
)
STYLE = re.compile(
    r"\b(?:answers?|responses?|repl(?:y|ies)|emojis?|bullet points|bullets|tone|indentation"
    r"|spaces|tabs|units|metric|imperial|time ?zone|markdown|jargon|formal|informal|concise"
    r"|brief|verbose|english|french|spanish|german|portuguese|italian|meetings?|calls?|email me"
    r"|notifications?|citations|sources)\b"
)
TASK_OBJECT = re.compile(
    r"\b(?:above|below|following|this|that|these|those|it|post|text|article|email|story|essay"
    r"|paragraph|passage|document|poem|letter|script|code snippet|message|draft|list|generation)\b"
)
RELATIONS = (
    r"manager|boss|wife|husband|partner|sister|brother|mother|mom|mum|dad|father|son|daughter"
    r"|friend|best friend|cousin|aunt|uncle|colleague|coworker|co-worker|roommate|flatmate|landlord"
    r"|therapist|doctor|dentist|teacher|coach|girlfriend|boyfriend|fianc[eé]e?|grandma|grandpa"
    r"|grandmother|grandfather|neighbou?r|dog|cat|puppy|kitten|mentor|tech lead|team lead|cto|ceo"
    r"|cofounder|co-founder|assistant|nanny|stepson|stepdaughter|twin"
)
APPOSITIVE = re.compile(
    rf"\b(?P<poss>my|our) (?P<rel>{RELATIONS}) (?P<name>[a-z][\w'-]+(?: [a-z][\w'-]+)?)\b"
)
LEAD_WORD = re.compile(
    r"^(?:for|in|on|at|with|when it comes to|as for|regarding|about|after|before|during|since"
    r"|starting|from|beginning|as of|as a|as an|being a|being an|by|around|every|each|most)\b",
    re.IGNORECASE,
)
PRONOUN_SUBJECT = re.compile(r"\b(?:i|i'm|i've|i'll|i'd|we|we're|we've|we'll)\b", re.IGNORECASE)
POSSESSIVE_SUBJECT = re.compile(r"\b(?:my|our)\b", re.IGNORECASE)
