
/*
 * What the translators share: llm_tx_int() against "%lld" at the bounds,
 * and llm_tx_print() against cJSON_PrintUnformatted() byte for byte, over
 * whole numbers on both sides of 10^15, fractions, negative zero, what is
 * not a number, nested objects and arrays, raw items of the caller's,
 * numbers by reference and a member printed alone, the tree as it was
 * afterwards.
 */


#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "llm_tx.h"
#include "tap.h"


static size_t  test_allocs;


static void *
test_alloc(size_t size)
{
    test_allocs++;

    return malloc(size);
}


static void
test_free(void *p)
{
    free(p);
}


static void
test_int(int64_t n)
{
    char    buf[LLM_TX_INT_LEN + 1], want[32];
    size_t  len;

    len = llm_tx_int(buf, n);
    buf[len] = '\0';

    snprintf(want, sizeof(want), "%lld", (long long) n);

    tap_is_str(buf, want, "llm_tx_int(%s)", want);
}


/* the same print as cJSON's, and the tree unchanged by it */

static void
test_print(const char *what, cJSON *root)
{
    char  *got, *want, *again;

    want = cJSON_PrintUnformatted(root);
    got = llm_tx_print(root);
    again = cJSON_PrintUnformatted(root);

    if (tap_ok(got && want && strcmp(got, want) == 0, "%s: as cJSON prints",
               what))
    {
        /* void */

    } else {
        printf("#   got: %s\n#   expected: %s\n", got ? got : "(null)",
               want ? want : "(null)");
    }

    tap_ok(again && want && strcmp(again, want) == 0,
           "%s: the tree unchanged", what);

    cJSON_free(got);
    cJSON_free(want);
    cJSON_free(again);
}


static void
test_numbers(void)
{
    size_t         i;
    cJSON         *a;
    char           name[64];
    static double  v[] = {
        0, 1, -1, 7, 256, 4096, 1700000000, -1700000000, 2147483647,
        2147483648.0, -2147483648.0, -2147483649.0, 999999999999999.0,
        -999999999999999.0, 1e15, -1e15, 1e15 + 1, 9007199254740992.0,
        9007199254740993.0, 1e300, -1e300, 0.7, 0.1, 1.5, -2.25, 1e-7,
        123456789.125, 5e-324
    };

    for (i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
        a = cJSON_CreateNumber(v[i]);
        snprintf(name, sizeof(name), "%.17g", v[i]);
        test_print(name, a);
        tap_ok(cJSON_IsNumber(a) && a->valuedouble == v[i],
               "%s: still the number", name);
        cJSON_Delete(a);
    }

    a = cJSON_CreateNumber(-0.0);
    test_print("-0", a);
    cJSON_Delete(a);

    a = cJSON_CreateNumber(NAN);
    test_print("NaN", a);
    cJSON_Delete(a);

    a = cJSON_CreateNumber(INFINITY);
    test_print("infinity", a);
    cJSON_Delete(a);
}


static void
test_trees(void)
{
    cJSON       *root;
    const char  *json;

    json = "{\"model\":\"m\",\"max_tokens\":256,\"temperature\":0.7,"
           "\"top_p\":1,\"stop\":[\"a\",\"b\"],\"messages\":[{\"role\":"
           "\"user\",\"content\":[{\"type\":\"text\",\"text\":\"hi\\n\\u00e9\"}"
           ",{\"n\":[1,2,[3,-4.5,{\"x\":1e20}],{}],\"e\":[],\"o\":{}}]}],"
           "\"tools\":[{\"input_schema\":{\"minimum\":-3,\"maximum\":1e16}}],"
           "\"t\":true,\"f\":false,\"z\":null}";

    root = cJSON_Parse(json);
    tap_ok(root != NULL, "a request's tree");
    test_print("a request's tree", root);
    tap_ok(cJSON_IsNumber(cJSON_GetObjectItem(root, "max_tokens"))
           && cJSON_GetObjectItem(root, "max_tokens")->valueint == 256,
           "its numbers numbers again");
    cJSON_Delete(root);

    /* a raw item of the caller's is printed as it is, and kept */
    root = cJSON_CreateObject();
    cJSON_AddItemToObject(root, "raw", cJSON_CreateRaw("12345678901234567890"));
    cJSON_AddItemToObject(root, "n", cJSON_CreateNumber(3));
    test_print("a raw item", root);
    tap_ok(cJSON_IsRaw(cJSON_GetObjectItem(root, "raw")),
           "the raw item still raw");
    cJSON_Delete(root);

    /* numbers under constant names (cJSON_StringIsConst), as the request
       translator adds them: printed without printf, their flags kept */
    root = cJSON_CreateObject();
    cJSON_AddItemToObjectCS(root, "max_tokens", cJSON_CreateNumber(16));
    cJSON_AddItemToObjectCS(root, "temperature", cJSON_CreateNumber(0.5));
    test_print("numbers under constant names", root);
    tap_ok(cJSON_GetObjectItem(root, "max_tokens")->type
           == (cJSON_Number | cJSON_StringIsConst),
           "a constant name's number as it was");
    cJSON_Delete(root);

    /* a member printed alone: its siblings after it are not its own */
    root = cJSON_Parse("{\"input\":{\"q\":\"x\"},\"n\":[1,2,3,4,5]}");
    {
        char   *got;
        cJSON  *input = cJSON_GetObjectItem(root, "input");
        size_t  before;

        test_print("a member with siblings", input);

        size_t  theirs;

        cJSON_InitHooks(&(cJSON_Hooks) { test_alloc, test_free });
        before = test_allocs;
        got = cJSON_PrintUnformatted(input);
        theirs = test_allocs - before;
        cJSON_free(got);

        before = test_allocs;
        got = llm_tx_print(input);
        tap_is(test_allocs - before, theirs,
               "a member without numbers: cJSON's allocations, none for its "
               "siblings' numbers");
        cJSON_free(got);
        cJSON_InitHooks(NULL);
    }
    cJSON_Delete(root);

    /* a number that is a reference is left as it is, flag and all */
    {
        cJSON  *shared = cJSON_CreateNumber(42);

        root = cJSON_CreateArray();
        cJSON_AddItemReferenceToArray(root, shared);
        cJSON_AddItemToArray(root, cJSON_CreateNumber(7));
        test_print("a number by reference", root);
        tap_ok(root->child->type == (cJSON_Number | cJSON_IsReference),
               "the reference's type as it was");
        cJSON_Delete(root);
        cJSON_Delete(shared);
    }

    /* a tree without numbers, and an empty one */
    root = cJSON_Parse("[\"a\",[],{}]");
    test_print("no numbers", root);
    cJSON_Delete(root);
}


int
main(void)
{
    test_int(0);
    test_int(1);
    test_int(-1);
    test_int(9);
    test_int(10);
    test_int(-10);
    test_int(1700000000);
    test_int(INT64_MAX);
    test_int(INT64_MIN);
    test_int(INT64_MIN + 1);

    test_numbers();
    test_trees();

    return tap_done();
}
