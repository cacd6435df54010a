
/*
 * The journal, step by step: places held, claims in a window, ACKs in
 * order, what a closed connection and a dead worker give back, the ring's
 * end padded.  sim_protocol.c runs the same code against faults; the two
 * cases it found are here as they were found.
 */


#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "llm_journal.h"
#include "llm_record.h"
#include "tap.h"


#define P  LLM_JOURNAL_PLACE


static size_t test_frame(uint8_t *buf, const char *id, int largest);
static int test_ack(llm_journal_t *j, int32_t owner, llm_journal_window_t *w,
    const char *id);
static int test_dead(int32_t owner, void *data);
static void test_round(void);
static void test_window(void);
static void test_release_reap(void);
static void test_hold(void);
static void test_admit_keeps_padding(void);
static void test_pid_again(void);


static uint8_t   test_ring[16 * 1024] __attribute__((aligned(16)));
static uint64_t  test_pos[8];


int
main(void)
{
    test_round();
    test_window();
    test_release_reap();
    test_hold();
    test_admit_keeps_padding();
    test_pid_again();

    return tap_done();
}


/* a settle record's frame; the largest has every string at its longest */

static size_t
test_frame(uint8_t *buf, const char *id, int largest)
{
    char          s[LLM_RECORD_MODEL_MAX];
    llm_record_t  rec;

    memset(&rec, 0, sizeof(llm_record_t));
    memset(s, 'x', sizeof(s));

    rec.type = LLM_REC_SETTLE;
    rec.status = 200;
    rec.tenant_id = 1;
    rec.input_tokens = 100;
    rec.api = LLM_API_OPENAI;

    if (largest) {
        llm_record_set_request_id(&rec, s, LLM_RECORD_ID_MAX);
        memcpy(rec.request_id, id, strlen(id));
        llm_record_set_model(&rec, s, LLM_RECORD_MODEL_MAX);
        llm_record_set_finish_reason(&rec, s, LLM_RECORD_FINISH_MAX);
        llm_record_set_backend(&rec, s, LLM_RECORD_BACKEND_MAX);
        llm_record_set_provider_key(&rec, s, LLM_RECORD_BACKEND_MAX);
        llm_record_set_response_id(&rec, s, LLM_RECORD_UPSTREAM_MAX);
        llm_record_set_upstream_model(&rec, s, LLM_RECORD_UPSTREAM_MAX);
        rec.up_api = LLM_API_ANTHROPIC;

    } else {
        llm_record_set_request_id(&rec, id, strlen(id));
    }

    return llm_record_encode(&rec, buf, LLM_RECORD_MAX_FRAME);
}


static int
test_ack(llm_journal_t *j, int32_t owner, llm_journal_window_t *w,
    const char *id)
{
    return llm_journal_ack(j, owner, w, (const uint8_t *) id, strlen(id));
}


static int
test_dead(int32_t owner, void *data)
{
    return owner != *(int32_t *) data;
}


static void
test_round(void)
{
    size_t                n, len;
    uint8_t               frame[LLM_RECORD_MAX_FRAME], out[4096];
    llm_journal_t         j;
    llm_journal_window_t  w = { test_pos, 8, 0, 0 };
    llm_journal_stats_t   st;

    tap_is(llm_journal_init(&j, test_ring, 2 * P - 16), -1,
           "a ring of less than two places is refused");
    tap_is(llm_journal_init(&j, test_ring, 2 * P + 8), -1,
           "a ring of a size not a multiple of 16 is refused");
    tap_is(llm_journal_init(&j, test_ring, 4096), 0, "a ring of 4096");

    tap_is(llm_journal_hold(&j), 1, "a place held");
    len = test_frame(frame, "r1", 0);
    tap_is(llm_journal_write(&j, frame, len, 1), 0, "its record written");
    tap_is(j.held, 0, "the place given back by the write");

    n = llm_journal_claim(&j, 100, &w, out, sizeof(out));
    tap_is(n, len, "claimed: the frame, as written");
    tap_ok(memcmp(out, frame, len) == 0, "byte for byte");
    tap_is(llm_journal_claim(&j, 101, &w, out, sizeof(out)), 0,
           "claimed once: nothing for another");

    tap_is(test_ack(&j, 100, &w, "r2"), -1, "an ACK of another record: no");
    tap_is(test_ack(&j, 101, &w, "r1"), -1, "an ACK by another owner: no");
    tap_is(test_ack(&j, 100, &w, "r1"), 0, "the ACK");
    tap_is(test_ack(&j, 100, &w, "r1"), -1, "the same ACK again: no");

    llm_journal_stats(&j, &st);
    tap_ok(st.written == 1 && st.acked == 1 && st.used == 0 && st.held == 0,
           "stats: written 1, acked 1, nothing used or held");
}


/* a window of 2: two frames out, the third after an ACK */

static void
test_window(void)
{
    uint8_t               frame[LLM_RECORD_MAX_FRAME], out[4096];
    llm_journal_t         j;
    llm_journal_window_t  w = { test_pos, 2, 0, 0 };

    llm_journal_init(&j, test_ring, 4096);

    llm_journal_write(&j, frame, test_frame(frame, "a", 0), 0);
    llm_journal_write(&j, frame, test_frame(frame, "b", 0), 0);
    llm_journal_write(&j, frame, test_frame(frame, "c", 0), 0);

    tap_is(llm_journal_claim(&j, 100, &w, out, sizeof(out)),
           2 * test_frame(frame, "a", 0), "a window of 2: two frames");
    tap_is(llm_journal_claim(&j, 100, &w, out, sizeof(out)), 0,
           "the window full: none");
    tap_is(test_ack(&j, 100, &w, "b"), -1, "b acknowledged before a: no");
    tap_is(test_ack(&j, 100, &w, "a"), 0, "a");
    tap_is(llm_journal_claim(&j, 100, &w, out, sizeof(out)),
           test_frame(frame, "c", 0), "room for c");
    tap_ok(test_ack(&j, 100, &w, "b") == 0 && test_ack(&j, 100, &w, "c") == 0
           && j.head == j.tail, "b, c: the journal is empty");
}


static void
test_release_reap(void)
{
    int32_t               dead, gone;
    uint8_t               frame[LLM_RECORD_MAX_FRAME], out[4096];
    llm_journal_t         j;
    llm_journal_window_t  w = { test_pos, 8, 0, 0 };
    uint64_t              other[8];
    llm_journal_window_t  w2 = { other, 8, 0, 0 };

    llm_journal_init(&j, test_ring, 4096);

    llm_journal_write(&j, frame, test_frame(frame, "a", 0), 0);
    llm_journal_write(&j, frame, test_frame(frame, "b", 0), 0);

    llm_journal_claim(&j, 100, &w, out, sizeof(out));
    llm_journal_release(&j, 100, &w);

    tap_is(w.n, 0, "released: the window empty");
    tap_is(llm_journal_claim(&j, 101, &w2, out, sizeof(out)),
           2 * test_frame(frame, "a", 0), "released: another sends both");

    /* 101 dies with them */
    gone = 101;
    tap_is(llm_journal_reap(&j, 102, test_dead, &gone, &dead), 2,
           "the dead owner's two are reaped");
    tap_is(dead, 101, "and named");
    tap_is(llm_journal_reap(&j, 102, test_dead, &gone, &dead), 0,
           "once");

    w.n = 0;
    tap_is(llm_journal_claim(&j, 102, &w, out, sizeof(out)),
           2 * test_frame(frame, "a", 0), "a live one sends them");

    gone = 0;
    tap_is(llm_journal_reap(&j, 103, test_dead, &gone, &dead), 0,
           "a live owner's are left alone");
}


/*
 * Places: one more is always kept for the padding at the ring's end, so
 * that a ring of four holds three.
 */

static void
test_hold(void)
{
    uint8_t        frame[LLM_RECORD_MAX_FRAME];
    llm_journal_t  j;

    llm_journal_init(&j, test_ring, 4 * P);

    tap_ok(llm_journal_hold(&j) && llm_journal_hold(&j)
           && llm_journal_hold(&j), "a ring of four places: three held");
    tap_is(llm_journal_hold(&j), 0, "not a fourth");

    tap_is(llm_journal_write(&j, frame, test_frame(frame, "a", 0), 0), -1,
           "a record without a place does not fit: lost");
    tap_is(j.lost, 1, "counted");

    llm_journal_unhold(&j);
    tap_is(j.held, 2 * P, "a place given back");
}


/*
 * Found by the simulation (full=admit): records without a place took the
 * room kept for the padding, and a held record that had to wrap was lost.
 * The ring of 112 + 3 P - 32 starts at 112; a place (P) is held; two
 * records without one take P each.  The held one (P) finds P - 32 bytes at
 * the ring's end: that padding and P at the start need 2 P - 32, and P + 80
 * were free.
 */

static void
test_admit_keeps_padding(void)
{
    uint8_t               frame[LLM_RECORD_MAX_FRAME], out[4096];
    llm_journal_t         j;
    llm_journal_window_t  w = { test_pos, 8, 0, 0 };

    llm_journal_init(&j, test_ring, 112 + 3 * P - 32);

    /* the smallest entry written and acknowledged: the head at 112 */
    llm_journal_write(&j, frame, test_frame(frame, "r0", 0), 0);
    llm_journal_claim(&j, 100, &w, out, sizeof(out));
    test_ack(&j, 100, &w, "r0");
    tap_ok(j.head == 112 && j.tail == 112, "the head at 112");

    tap_is(llm_journal_hold(&j), 1, "a place held");
    tap_is(llm_journal_write(&j, frame, test_frame(frame, "u1", 1), 0), 0,
           "a record without a place (P)");
    tap_is(llm_journal_write(&j, frame, test_frame(frame, "u2", 1), 0), -1,
           "a second one would take the padding's room: lost");
    tap_is(llm_journal_write(&j, frame, test_frame(frame, "h1", 1), 1), 0,
           "the held record is written");
}


/*
 * Found by the simulation: a worker started with the pid of one that was
 * killed with records sent.  The reapers think it alive, and it does not
 * know them: they stayed SENT for good, and the journal filled.
 */

static void
test_pid_again(void)
{
    int32_t               dead, gone;
    uint8_t               frame[LLM_RECORD_MAX_FRAME], out[4096];
    llm_journal_t         j;
    llm_journal_window_t  w = { test_pos, 8, 0, 0 };

    llm_journal_init(&j, test_ring, 4096);

    llm_journal_write(&j, frame, test_frame(frame, "a", 0), 0);
    llm_journal_claim(&j, 100, &w, out, sizeof(out));

    /* 100 is killed; a new worker gets pid 100 */
    gone = 0;
    tap_is(llm_journal_reap(&j, 101, test_dead, &gone, &dead), 0,
           "pid 100 lives again: the reaper leaves its record");

    w.n = 0;
    tap_is(llm_journal_claim(&j, 100, &w, out, sizeof(out)), 0,
           "and the new 100 does not send it");

    tap_is(llm_journal_adopt(&j, 100), 1, "adopted when it starts");
    tap_is(llm_journal_claim(&j, 100, &w, out, sizeof(out)),
           test_frame(frame, "a", 0), "and sent");
    tap_ok(test_ack(&j, 100, &w, "a") == 0 && j.head == j.tail,
           "acknowledged: the journal is empty");
}
