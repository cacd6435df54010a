
/*
 * A read-only JSON parser that builds cJSON's tree in blocks; see
 * llm_json.h.
 */


#include <limits.h>
#include <locale.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "llm_json.h"


/* cJSON copies at most this many bytes of a number for strtod() */
#define LLM_JSON_NUMBER_MAX  63

/* integers of up to 15 digits are exact in a double: no strtod() */
#define LLM_JSON_DIGITS      15


struct llm_json_block_s {
    llm_json_block_t     *next;
    size_t                used;
    size_t                size;
    cJSON                 nodes[];
};


typedef struct {
    const unsigned char  *p;
    const unsigned char  *last;
    const unsigned char  *body;
    llm_json_t           *js;
    size_t                max_depth;
    size_t                max_string;
    size_t                depth;
    size_t                grow;          /* nodes in the next block */
} llm_json_parser_t;


static cJSON *llm_json_node(llm_json_parser_t *ps);
static int llm_json_value(llm_json_parser_t *ps, cJSON *item);
static int llm_json_object(llm_json_parser_t *ps, cJSON *item);
static int llm_json_array(llm_json_parser_t *ps, cJSON *item);
static cJSON *llm_json_item(llm_json_parser_t *ps, cJSON **head,
    cJSON **tail);
static int llm_json_next(llm_json_parser_t *ps, unsigned char close);
static int llm_json_distinct(const cJSON *head, size_t n);
static int llm_json_string(llm_json_parser_t *ps, char **out);
static int llm_json_escape(const unsigned char **pp,
    const unsigned char *last, unsigned char **dp);
static int llm_json_unicode(const unsigned char **pp,
    const unsigned char *last, unsigned char **dp);
static long llm_json_hex(const unsigned char *p);
static int llm_json_number(llm_json_parser_t *ps, cJSON *item);


/* only the blanks JSON has: llm_inspect_scan() refuses other control bytes */

static inline void
llm_json_blanks(llm_json_parser_t *ps)
{
    while (ps->p < ps->last
           && (*ps->p == ' ' || *ps->p == '\n' || *ps->p == '\r'
               || *ps->p == '\t'))
    {
        ps->p++;
    }
}


cJSON *
llm_json_parse(llm_json_t *js, const char *body, size_t len,
    size_t max_depth, size_t max_string)
{
    cJSON              *root;
    llm_json_parser_t   ps;

    js->text = NULL;
    js->blocks = NULL;
    js->unique = 1;

    ps.body = (const unsigned char *) body;
    ps.p = ps.body;
    ps.last = ps.body + len;
    ps.js = js;
    ps.max_depth = max_depth;
    ps.max_string = max_string;
    ps.depth = 0;

    /* a chat body has about a node in 16 bytes */
    ps.grow = len / 16 + 16;

    /* cJSON also takes a byte-order mark, and other values: its parse */
    llm_json_blanks(&ps);

    if (ps.p == ps.last || *ps.p != '{') {
        return NULL;
    }

    /* each string is decoded where it was sent: never longer */
    js->text = cJSON_malloc(len + 1);
    if (js->text == NULL) {
        return NULL;
    }

    root = llm_json_node(&ps);

    if (root == NULL || llm_json_value(&ps, root) != 0) {
        return NULL;
    }

    llm_json_blanks(&ps);

    if (ps.p != ps.last) {
        return NULL;
    }

    return root;
}


void
llm_json_free(llm_json_t *js)
{
    llm_json_block_t  *b, *next;

    for (b = js->blocks; b; b = next) {
        next = b->next;
        cJSON_free(b);
    }

    if (js->text != NULL) {
        cJSON_free(js->text);
    }

    js->blocks = NULL;
    js->text = NULL;
}


static cJSON *
llm_json_node(llm_json_parser_t *ps)
{
    cJSON             *c;
    llm_json_block_t  *b;

    b = ps->js->blocks;

    if (b == NULL || b->used == b->size) {
        b = cJSON_malloc(sizeof(llm_json_block_t)
                         + ps->grow * sizeof(cJSON));
        if (b == NULL) {
            return NULL;
        }

        b->next = ps->js->blocks;
        b->used = 0;
        b->size = ps->grow;
        ps->js->blocks = b;
        ps->grow *= 2;
    }

    c = &b->nodes[b->used++];
    memset(c, 0, sizeof(cJSON));

    return c;
}


/* in cJSON's order of tries: null, false, true, string, number, [, { */

static int
llm_json_value(llm_json_parser_t *ps, cJSON *item)
{
    size_t  left;

    if (ps->p == ps->last) {
        return -1;
    }

    left = ps->last - ps->p;

    switch (*ps->p) {

    case 'n':
        if (left < 4 || memcmp(ps->p, "null", 4) != 0) {
            return -1;
        }

        item->type = cJSON_NULL;
        ps->p += 4;
        return 0;

    case 'f':
        if (left < 5 || memcmp(ps->p, "false", 5) != 0) {
            return -1;
        }

        item->type = cJSON_False;
        ps->p += 5;
        return 0;

    case 't':
        if (left < 4 || memcmp(ps->p, "true", 4) != 0) {
            return -1;
        }

        item->type = cJSON_True;
        item->valueint = 1;
        ps->p += 4;
        return 0;

    case '"':
        item->type = cJSON_String;
        return llm_json_string(ps, &item->valuestring);

    case '[':
        return llm_json_array(ps, item);

    case '{':
        return llm_json_object(ps, item);

    default:
        if (*ps->p == '-' || (*ps->p >= '0' && *ps->p <= '9')) {
            return llm_json_number(ps, item);
        }

        return -1;
    }
}


static int
llm_json_object(llm_json_parser_t *ps, cJSON *item)
{
    int      rc;
    char    *name;
    size_t   n;
    cJSON   *head, *tail, *c;

    if (++ps->depth > ps->max_depth || ps->depth > LLM_JSON_DEPTH_MAX) {
        return -1;
    }

    item->type = cJSON_Object;
    ps->p++;
    llm_json_blanks(ps);

    if (ps->p < ps->last && *ps->p == '}') {
        ps->p++;
        ps->depth--;
        return 0;
    }

    head = NULL;
    tail = NULL;
    n = 0;

    for ( ;; ) {
        llm_json_blanks(ps);

        if (ps->p == ps->last || *ps->p != '"'
            || llm_json_string(ps, &name) != 0)
        {
            return -1;
        }

        llm_json_blanks(ps);

        if (ps->p == ps->last || *ps->p != ':') {
            return -1;
        }

        ps->p++;
        llm_json_blanks(ps);

        c = llm_json_item(ps, &head, &tail);
        if (c == NULL) {
            return -1;
        }

        c->string = name;
        n++;

        rc = llm_json_next(ps, '}');
        if (rc < 0) {
            return -1;
        }

        if (rc == 0) {
            break;
        }
    }

    /* as cJSON links them: the first's prev is the last */
    head->prev = tail;
    item->child = head;

    if (ps->js->unique && !llm_json_distinct(head, n)) {
        ps->js->unique = 0;
    }

    ps->depth--;

    return 0;
}


static int
llm_json_array(llm_json_parser_t *ps, cJSON *item)
{
    int     rc;
    cJSON  *head, *tail;

    if (++ps->depth > ps->max_depth || ps->depth > LLM_JSON_DEPTH_MAX) {
        return -1;
    }

    item->type = cJSON_Array;
    ps->p++;
    llm_json_blanks(ps);

    if (ps->p < ps->last && *ps->p == ']') {
        ps->p++;
        ps->depth--;
        return 0;
    }

    head = NULL;
    tail = NULL;

    for ( ;; ) {
        llm_json_blanks(ps);

        if (llm_json_item(ps, &head, &tail) == NULL) {
            return -1;
        }

        rc = llm_json_next(ps, ']');
        if (rc < 0) {
            return -1;
        }

        if (rc == 0) {
            break;
        }
    }

    head->prev = tail;
    item->child = head;
    ps->depth--;

    return 0;
}


/*
 * 1 if no two members of a small object share a name; a larger one is
 * left to the inspector's own check, which names the repeated member.
 */

/* a member's or an element's node, linked after the others, its value read */
static cJSON *
llm_json_item(llm_json_parser_t *ps, cJSON **head, cJSON **tail)
{
    cJSON  *c;

    c = llm_json_node(ps);
    if (c == NULL) {
        return NULL;
    }

    if (*head == NULL) {
        *head = c;

    } else {
        (*tail)->next = c;
        c->prev = *tail;
    }

    *tail = c;

    return llm_json_value(ps, c) == 0 ? c : NULL;
}


/* after a value: 1 another follows (','), 0 the container closes, -1 bad */
static int
llm_json_next(llm_json_parser_t *ps, unsigned char close)
{
    llm_json_blanks(ps);

    if (ps->p == ps->last) {
        return -1;
    }

    if (*ps->p == ',') {
        ps->p++;
        return 1;
    }

    if (*ps->p != close) {
        return -1;
    }

    ps->p++;

    return 0;
}


static int
llm_json_distinct(const cJSON *head, size_t n)
{
    const cJSON  *m, *c;

    if (n > LLM_JSON_PAIRWISE) {
        return 0;
    }

    for (m = head; m; m = m->next) {
        for (c = m->next; c; c = c->next) {
            if (m->string[0] == c->string[0]
                && strcmp(m->string, c->string) == 0)
            {
                return 0;
            }
        }
    }

    return 1;
}


/*
 * A string from the quote at ps->p, decoded into js->text at the quote's
 * offset.  Raw control bytes, a string longer than max_string as sent
 * (llm_inspect_scan() refuses both) and escapes cJSON would read otherwise
 * than JSON does are left to cJSON's parse.
 */

static int
llm_json_string(llm_json_parser_t *ps, char **out)
{
    unsigned char         c, *dst;
    const unsigned char  *p, *start, *last;

    start = ps->p + 1;
    last = ps->last;
    dst = (unsigned char *) ps->js->text + (ps->p - ps->body);
    *out = (char *) dst;

    p = start;

    for ( ;; ) {
        if (p == last) {
            return -1;
        }

        c = *p;

        if (c == '"') {
            break;
        }

        if (c < 0x20) {
            return -1;
        }

        if (c != '\\') {
            *dst++ = c;
            p++;
            continue;
        }

        if (llm_json_escape(&p, last, &dst) != 0) {
            return -1;
        }
    }

    if ((size_t) (p - start) > ps->max_string) {
        return -1;
    }

    *dst = '\0';
    ps->p = p + 1;

    return 0;
}


static int
llm_json_escape(const unsigned char **pp, const unsigned char *last,
    unsigned char **dp)
{
    unsigned char         c;
    const unsigned char  *p;

    p = *pp;

    if (last - p < 2) {
        return -1;
    }

    switch (p[1]) {

    case 'b':
        c = '\b';
        break;

    case 'f':
        c = '\f';
        break;

    case 'n':
        c = '\n';
        break;

    case 'r':
        c = '\r';
        break;

    case 't':
        c = '\t';
        break;

    case '"':
    case '\\':
    case '/':
        c = p[1];
        break;

    case 'u':
        return llm_json_unicode(pp, last, dp);

    default:
        return -1;
    }

    *(*dp)++ = c;
    *pp = p + 2;

    return 0;
}


/*
 * \uXXXX, or a surrogate pair, as UTF-8.  cJSON reads a bad hex digit as
 * a string of zeros, a NUL that would cut the string short: such escapes,
 * and \u0000, which the scan refuses, are left to it.
 */

static int
llm_json_unicode(const unsigned char **pp, const unsigned char *last,
    unsigned char **dp)
{
    long                  cp, lo;
    size_t                n, i;
    unsigned char        *d;
    const unsigned char  *p;

    p = *pp;

    if (last - p < 6) {
        return -1;
    }

    cp = llm_json_hex(p + 2);

    if (cp <= 0 || (cp >= 0xdc00 && cp <= 0xdfff)) {
        return -1;
    }

    n = 6;

    if (cp >= 0xd800 && cp <= 0xdbff) {
        if (last - p < 12 || p[6] != '\\' || p[7] != 'u') {
            return -1;
        }

        lo = llm_json_hex(p + 8);

        if (lo < 0xdc00 || lo > 0xdfff) {
            return -1;
        }

        cp = 0x10000 + (((cp & 0x3ff) << 10) | (lo & 0x3ff));
        n = 12;
    }

    d = *dp;

    if (cp < 0x80) {
        d[0] = (unsigned char) cp;
        i = 1;

    } else if (cp < 0x800) {
        d[0] = (unsigned char) (0xc0 | (cp >> 6));
        d[1] = (unsigned char) (0x80 | (cp & 0x3f));
        i = 2;

    } else if (cp < 0x10000) {
        d[0] = (unsigned char) (0xe0 | (cp >> 12));
        d[1] = (unsigned char) (0x80 | ((cp >> 6) & 0x3f));
        d[2] = (unsigned char) (0x80 | (cp & 0x3f));
        i = 3;

    } else {
        d[0] = (unsigned char) (0xf0 | (cp >> 18));
        d[1] = (unsigned char) (0x80 | ((cp >> 12) & 0x3f));
        d[2] = (unsigned char) (0x80 | ((cp >> 6) & 0x3f));
        d[3] = (unsigned char) (0x80 | (cp & 0x3f));
        i = 4;
    }

    *dp = d + i;
    *pp = p + n;

    return 0;
}


/* four hex digits, or -1 */

static long
llm_json_hex(const unsigned char *p)
{
    long      v;
    size_t    i;
    unsigned  c;

    v = 0;

    for (i = 0; i < 4; i++) {
        c = p[i];

        if (c >= '0' && c <= '9') {
            c -= '0';

        } else if (c >= 'a' && c <= 'f') {
            c -= 'a' - 10;

        } else if (c >= 'A' && c <= 'F') {
            c -= 'A' - 10;

        } else {
            return -1;
        }

        v = (v << 4) | c;
    }

    return v;
}


/*
 * As cJSON reads a number: the run of bytes a number may hold, at most 63,
 * through strtod() with the locale's decimal point; the rest of the run,
 * if strtod() leaves any, is for the grammar to refuse.  A plain integer
 * short enough to be exact needs no strtod().
 */

static int
llm_json_number(llm_json_parser_t *ps, cJSON *item)
{
    char                  buf[LLM_JSON_NUMBER_MAX + 1], *end, point;
    double                d;
    size_t                i, n, neg;
    uint64_t              v;
    const unsigned char  *p;

    p = ps->p;

    for (n = 0; n < LLM_JSON_NUMBER_MAX && p + n < ps->last; n++) {
        if (!((p[n] >= '0' && p[n] <= '9') || p[n] == '+' || p[n] == '-'
              || p[n] == 'e' || p[n] == 'E' || p[n] == '.'))
        {
            break;
        }
    }

    neg = (p[0] == '-');
    v = 0;

    for (i = neg; i < n && i - neg < LLM_JSON_DIGITS + 1; i++) {
        if (p[i] < '0' || p[i] > '9') {
            break;
        }

        v = v * 10 + (p[i] - '0');
    }

    if (i == n && i > neg && i - neg <= LLM_JSON_DIGITS) {
        d = neg ? -(double) v : (double) v;
        ps->p += n;

    } else {
        point = localeconv()->decimal_point[0];

        for (i = 0; i < n; i++) {
            buf[i] = (p[i] == '.') ? point : (char) p[i];
        }

        buf[n] = '\0';

        d = strtod(buf, &end);

        if (end == buf) {
            return -1;
        }

        ps->p += end - buf;
    }

    item->type = cJSON_Number;
    item->valuedouble = d;

    /* as cJSON saturates it */
    if (d >= INT_MAX) {
        item->valueint = INT_MAX;

    } else if (d <= (double) INT_MIN) {
        item->valueint = INT_MIN;

    } else {
        item->valueint = (int) d;
    }

    return 0;
}
