/* pp_words.c: the post-processor's word lists and its request-verb table.
 *
 * These are facts about the makers' engine (libneedle3 3.0.1), as
 * ddrscott/needle-rs recovered them from its tables and probed them: which
 * words count as a quantity, a place, a control word, a negation cue, and so
 * on. Changing one changes which calls are repaired or withheld, so each list
 * keeps the engine's members (and, where a rule scans in order, its order).
 *
 * A list is one string, items separated by '|': a packed string costs its
 * bytes and nothing else in wasm (a table of pointers would add four bytes
 * and a relocation per item). Items may hold spaces. */
#ifdef ND_NEEDLE3
#include <string.h>

#include "agent/postprocess.h"

int pp_next_item(const char **cursor, pp_str *item) {
    const char *s = *cursor;
    if (!*s) return 0;
    const char *bar = strchr(s, '|');
    size_t n = bar ? (size_t)(bar - s) : strlen(s);
    *item = (pp_str){s, n};
    *cursor = bar ? bar + 1 : s + n;
    return 1;
}

size_t pp_list_index(pp_str w, const char *list) {
    pp_str item;
    for (size_t i = 0; pp_next_item(&list, &item); i++)
        if (pp_eq(item, w)) return i;
    return PP_NONE;
}

int pp_in(pp_str w, const char *list) { return pp_list_index(w, list) != PP_NONE; }

int pp_in_ci(pp_str w, const char *list) {
    pp_str item;
    while (pp_next_item(&list, &item))
        if (pp_eq_ci(item, w)) return 1;
    return 0;
}

int pp_sub_in(pp_str hay, const char *list) {
    pp_str item;
    while (pp_next_item(&list, &item))
        if (pp_has_ci(hay, item)) return 1;
    return 0;
}

int pp_piece_in(pp_str name, const char *list) {
    size_t i = 0;
    while (i < name.n) {
        size_t start = i;
        while (i < name.n && name.p[i] != ' ' && name.p[i] != '-' && name.p[i] != '_') i++;
        if (i > start && pp_in_ci(pp_sub(name, start, i), list)) return 1;
        i++;
    }
    return 0;
}

/* ---- shared ---------------------------------------------------------------- */
/* Words that state a quantity or a time (92). */
const char PP_QUANTITY_WORDS[] =
    "zero|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|"
    "fifteen|sixteen|seventeen|eighteen|nineteen|twenty|thirty|forty|fifty|sixty|seventy|eighty|"
    "ninety|hundred|thousand|million|billion|half|quarter|third|double|triple|dozen|couple|few|"
    "several|first|second|last|next|previous|past|today|tomorrow|yesterday|tonight|now|noon|"
    "midnight|morning|evening|afternoon|week|weekly|weekend|month|monthly|year|yearly|annual|"
    "annually|day|daily|hour|hourly|minute|decade|century|max|maximum|min|minimum|full|fully|"
    "highest|lowest|all|everything|halfway|middle|mute|muted|silent|silence|none|nothing|empty";
/* Not places: months, weekdays, units, currencies, pronouns, am/pm. */
const char PP_NON_PLACE[] =
    "january|february|march|april|may|june|july|august|september|october|november|december|"
    "monday|tuesday|wednesday|thursday|friday|saturday|sunday|celsius|fahrenheit|kelvin|usd|eur|"
    "gbp|i|we|you|he|she|they|it|am|pm";
const char PP_PLACE_SLOT[] = "room|place|venue|area|zone|city|site|location|region";
const char PP_DATE_KEY[] = "date|time|when|start|end|due|schedule";
/* Tool-name words that never count (beside words under three bytes). */
const char PP_STEM_DROP[] = "get|set|the|and|for|with";
/* A verb phrase does not count with one of these in the 12 bytes before it. */
const char PP_NEG_BEFORE[] = "don't|do not|dont|never|not";

/* ---- gates ----------------------------------------------------------------- */
const char PP_ORIGIN_KEYS[] =
    "from|start|origin|source|pickup|departure|start_city|pickup_city|from_location|start_location";
const char PP_DEST_KEYS[] =
    "to|end|target|arrival|dropoff|end_city|destination|to_location|end_location|dropoff_city";
/* Enum keys the unmentioned-option gate leaves alone (substrings). */
const char PP_ENUM_EXEMPT[] =
    "category|type|kind|priority|sentiment|intent|format|unit|metric|status|action|mode|level";
const char PP_CONTROL_SLOT[] =
    "action|command|state|mode|operation|op|setting|status|direction|toggle|switch|power|verb|intent";
const char PP_CONTROL_WORDS[] =
    "on|off|toggle|up|down|dim|brighten|open|close|start|stop|play|pause|mute|unmute|lock|unlock|"
    "raise|lower";
/* Clause ends after an exclusion or a negation. */
const char PP_TERMINATORS[] = ",|.|;|!|?| and | but | then | instead| just | only | rather";
const char PP_EXCLUSION_CUES[] =
    "except for|except|but not|but leave|leave out|apart from|other than|excluding|but skip|skip";
const char PP_NEGATION_CUES[] =
    "don't|do not|dont|never|no longer|must not|mustn't|shouldn't|should not|make sure not|no need";
/* "don't forget to ..." negates nothing. */
const char PP_NEG_FORGIVE[] = "forget|hesitate|worry|mind|disturb";
const char PP_REPORTING[] = "texted|said|wrote|emailed|messaged|posted|complained|mentioned|told me";
const char PP_ARTICLES[] = "the|my|a|an";

/* ---- repairs --------------------------------------------------------------- */
const char PP_FIRST_KEYS[] = "firstname|givenname|first_name|given_name|first|forename";
const char PP_LAST_KEYS[] = "surname|last_name|family_name|familyname|last|lastname";
const char PP_HONORIFICS[] = "dr|dr.|mr|mr.|mrs|mrs.|ms|ms.|miss|prof|prof.|sir|madam|mx|mx.";
/* Words before a surname that are no first name, and after a first name
 * that are no surname. */
const char PP_NOT_FIRST[] = "save|named|contact|create|please|call|name|my|add|for|the|new";
const char PP_NOT_LAST[] = "i|as|to|his|her|and|the|with|their|phone|email|please";
const char PP_PHONE_KEYS[] = "phone|mobile|tel|number|fax";
const char PP_TITLE_KEYS[] =
    "title|subject|event_name|event_title|extra_message|message|note|label";
/* File extensions and their MIME types (46). */
const char PP_MIME[] =
    "csv=text/csv|txt=text/plain|text=text/plain|html=text/html|htm=text/html|md=text/markdown|"
    "markdown=text/markdown|xml=application/xml|json=application/json|pdf=application/pdf|"
    "zip=application/zip|gz=application/gzip|tar=application/x-tar|doc=application/msword|"
    "docx=application/vnd.openxmlformats-officedocument.wordprocessingml.document|"
    "xls=application/vnd.ms-excel|"
    "xlsx=application/vnd.openxmlformats-officedocument.spreadsheetml.sheet|"
    "ppt=application/vnd.ms-powerpoint|"
    "pptx=application/vnd.openxmlformats-officedocument.presentationml.presentation|"
    "jpg=image/jpeg|jpeg=image/jpeg|png=image/png|gif=image/gif|webp=image/webp|"
    "svg=image/svg+xml|bmp=image/bmp|heic=image/heic|mp3=audio/mpeg|wav=audio/wav|ogg=audio/ogg|"
    "flac=audio/flac|m4a=audio/mp4|aac=audio/aac|mp4=video/mp4|mov=video/quicktime|"
    "avi=video/x-msvideo|mkv=video/x-matroska|webm=video/webm|py=text/x-python|"
    "js=application/javascript|apk=application/vnd.android.package-archive|"
    "exe=application/x-msdownload|epub=application/epub+zip|rtf=application/rtf|ics=text/calendar|"
    "vcf=text/vcard";

/* ---- places ---------------------------------------------------------------- */
const char PP_NOT_PLACE_KEY[] = "mail|phone|url|link|site|type|kind|mode|key|format|unit|category";
const char PP_PLACE_KEYS[] = "query|location|place|venue|where|address|destination";
const char PP_PLACE_TEXT[] = "address|location|navigate|directions|maps|map|place|venue|geo";
/* Words a place value may skip over in the request. */
const char PP_FILLER[] =
    "a|an|the|in|at|on|of|de|la|le|du|el|is|les|del|des|los|las|near|which|located|that";
const char PP_STOP_WORDS[] =
    "and|or|also|then|while|so|but|please|can|could|right|now|immediately|simultaneously|after|"
    "before|because|map|maps";
const char PP_PREPS[] = "at|in|on|near";
const char PP_PLACE_NOUNS[] =
    "bakery|cafe|restaurant|bookstore|gallery|hotel|museum|store|shop|market|library|venue|park|"
    "garden|kitchen|bistro|pub|bar|cinema|theater|theatre|stadium|arena|school|university|"
    "hospital|clinic|pharmacy|station|airport|mall|plaza|office|building|tower|center|centre|"
    "branch|exhibition|studio|salon|gym|church|temple|mosque|downtown|uptown|campus|hall|club|"
    "lounge|diner|eatery|pizzeria|trattoria|brasserie|boutique|supermarket|grocery|deli";
const char PP_SUFFIXES[] =
    "street|st|road|rd|avenue|ave|boulevard|blvd|lane|ln|drive|rue|via|plaza|plac|highway|hwy|"
    "calle|strasse|platz|square|piazza|avenida";
const char PP_ADDR_CONN[] =
    "de|del|la|le|les|des|du|los|las|el|of|the|and|n|s|e|w|ne|nw|se|sw|north|south|east|west|"
    "downtown|uptown|suite|ste|floor|unit|apt";
const char PP_TRAILING[] =
    "a|an|and|in|at|on|is|of|by|to|for|or|with|the|that|near|which|located";
const char PP_MERGE_GAP[] = "in|at|on|near|of|the|a|an|and|by|to|is|located|which|that|s";

/* ---- tail repairs ---------------------------------------------------------- */
const char PP_NUMBER_WORDS[] =
    "0=zero|1=one|1=single|2=two|2=couple|2=double|2=twice|3=three|3=triple|4=four|5=five|6=six|"
    "7=seven|8=eight|9=nine|10=ten|11=eleven|12=twelve|12=dozen|13=thirteen|14=fourteen|"
    "15=fifteen|16=sixteen|17=seventeen|18=eighteen|19=nineteen|20=twenty|30=thirty|40=forty|"
    "50=fifty|60=sixty|70=seventy|80=eighty|90=ninety|100=hundred|1000=thousand|"
    "1000000=million|0.5=half|0.25=quarter";
/* Slot names that name a thing or a person. */
const char PP_NAME_WORDS[] =
    "device|appliance|name|item|target|entity|object|thing|product|app|contact|title|recipient|"
    "person|who";
const char PP_LEFTOVER_FILLER[] =
    "can|could|would|will|you|please|kindly|hey|hi|ok|okay|i|i'd|want|need|like|to|me|my|our|"
    "us|it|the|a|an|this|that|these|those|some|now|right|just|go|ahead|and|for|of|with|so|then|"
    "also|again|quickly|asap|immediately|thanks|thank";
const char PP_LEFTOVER_CONTROL[] =
    "turn|switch|toggle|power|put|set|make|flip|start|stop|open|close|activate|deactivate|enable|"
    "disable|shut|run|kill|fire|up|down|off|on";
const char PP_ORIGIN_NAMES[] =
    "pickup|pickup_location|pickup_address|pickup_point|pickup_city|origin|origin_location|"
    "origin_city|origin_address|from_location|from_address|from_city|start_location|"
    "start_address|start_point|departure|departure_location|departure_city|departure_airport|"
    "starting_point|start_place";
const char PP_DEST_NAMES[] =
    "destination|destination_location|destination_city|destination_address|dropoff|"
    "dropoff_location|dropoff_address|dropoff_point|dropoff_city|drop_off|drop_off_location|"
    "to_location|to_address|to_city|end_location|end_address|end_point|arrival|"
    "arrival_location|arrival_city|arrival_airport|ending_point|end_place";
const char PP_PHRASE_STOP[] =
    "to|from|for|with|at|by|and|then|please|asap|now|today|tomorrow|tonight|around|before|after|"
    "via|using|in|on|picking|pick|drop|dropping";
/* A route phrase starting with one of these is no place. */
const char PP_NOT_A_PLACE[] =
    "get|go|be|see|catch|meet|make|have|do|take|visit|attend|buy|watch|eat|grab|book|order|find|"
    "check|call|send|reach|arrive|leave|come|bring|stay|wait|help|know|use|try|start|stop|play|"
    "set|turn|put|give|tell|let|keep|pay|ride|drive|walk|fly|travel|head|return|pick|drop";

/* ---- dates ----------------------------------------------------------------- */
const char PP_MONTHS[] =
    "january|february|march|april|may|june|july|august|september|october|november|december";
const char PP_WEEKDAYS[] = "monday|tuesday|wednesday|thursday|friday|saturday|sunday";

/* ---- verbs ----------------------------------------------------------------- */
/* Start/stop/pause/resume options, in the engine's order, and the request
 * words that name each. */
const char PP_TRANSPORT_KEYS[] = "resume|pause|stop|start";
const char *const PP_TRANSPORT_SYNONYMS[4] = {
    "resume|carry on|continue|keep going|keep cleaning|go on", "pause|hold on",
    "stop|halt|cancel", "start|begin"};

const pp_verb_row PP_VERBS[PP_VERB_ROWS] = {
    {"lock", "unlock", "lock", "lock|locked", "unlock|unlocked"},
    {"turn on|switch on|enable|power on|activate|turn back on|turn it on|back on",
     "turn off|switch off|disable|power off|deactivate|turn back off|turn it off|back off",
     "state|on|power|enabled|active|status", "on|enable|enabled", "off|disable|disabled"},
    {"open", "close|shut", "open|position|state", "open|opened", "close|closed"},
    {"mute", "unmute", "mute", "mute|muted", "unmute|unmuted"},
    {"increase|raise|turn up|crank up|pump up|bump up|louder|higher|boost|brighter|warmer|hotter|"
     "faster|bigger|up|more",
     "decrease|lower|turn down|bring down|quieter|softer|reduce|dimmer|cooler|colder|slower|"
     "smaller|down|quiet|dim|less|soften",
     "increase|raise",
     "increase|up|raise|higher|more|plus|increment|max|maximum|high|highest|loud|fast|bright",
     "decrease|down|lower|reduce|less|minus|decrement|min|minimum|low|lowest|quiet|slow|dim"},
};
#endif /* ND_NEEDLE3 */
