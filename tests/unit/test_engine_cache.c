/* test_engine_cache.c - the runtime's cache of suspended engines: bounded
 * in engines and in bytes, least recently used evicted first, an engine of
 * another execution never handed out. Engines are made without running
 * code; no threads, no store. */
#include "core/core.h"
#include "runtime/runtime.h"
#include "test.h"

static int orch_nothing(duro_orch *o, const char *input, duro_result *out)
{
    (void)o;
    (void)input;
    return duro_ok(out, NULL);
}

static duro_orch *engine(const char *id, uint64_t execution)
{
    duro__engine_config cfg = {.fn = orch_nothing, .max_payload = 4096};
    duro_orch *e = NULL;
    CHECK_OK(duro__engine_create(&cfg, id, execution, &e));
    return e;
}

/* Whether (id, execution) is kept; an engine taken is put back. */
static int kept(duro__engine_cache *c, const char *id, uint64_t execution)
{
    duro_orch *e = duro__cache_take(c, id, execution);
    if (e != NULL)
        duro__cache_put(c, e);
    return e != NULL;
}

TEST(the_cache_keeps_at_most_capacity_engines)
{
    duro__engine_cache *c = NULL;
    CHECK_OK(duro__cache_create(2, 0, &c));
    duro__cache_put(c, engine("a", 1));
    duro__cache_put(c, engine("b", 1));
    duro__cache_put(c, engine("c", 1));
    CHECK_EQ(duro__cache_size(c), 2);
    CHECK(!kept(c, "a", 1)); /* the least recently used went */
    CHECK(kept(c, "b", 1));  /* and b is now the most recent */
    duro__cache_put(c, engine("d", 1));
    CHECK(kept(c, "b", 1));
    CHECK(!kept(c, "c", 1));
    duro__cache_destroy(c);

    /* capacity 0 keeps nothing */
    CHECK_OK(duro__cache_create(0, 0, &c));
    duro__cache_put(c, engine("a", 1));
    CHECK_EQ(duro__cache_size(c), 0);
    duro__cache_destroy(c);
}

/* max_bytes bounds the engines' bytes whatever their count: evicting the
 * least recently used until they fit, the engine just put too when it
 * alone is over the bound. */
TEST(the_cache_keeps_at_most_max_bytes_of_engines)
{
    duro_orch *probe = engine("a", 1);
    size_t one = duro__engine_bytes(probe);
    CHECK(one > 0);
    duro__engine_destroy(probe);

    duro__engine_cache *c = NULL;
    CHECK_OK(duro__cache_create(100, 3 * one + one / 2, &c));
    const char *ids[] = {"a", "b", "c", "d", "e"};
    for (int i = 0; i < 5; i++)
        duro__cache_put(c, engine(ids[i], 1));
    CHECK_EQ(duro__cache_size(c), 3);
    CHECK_EQ(duro__cache_bytes(c), 3 * one);
    CHECK(!kept(c, "a", 1));
    CHECK(!kept(c, "b", 1));
    CHECK(kept(c, "c", 1) && kept(c, "d", 1) && kept(c, "e", 1));
    /* a bigger engine (a longer id: more arena) takes more of the bound */
    char big_id[8192];
    memset(big_id, 'x', sizeof(big_id) - 1);
    big_id[sizeof(big_id) - 1] = '\0';
    duro_orch *big = engine(big_id, 1);
    size_t big_bytes = duro__engine_bytes(big);
    CHECK(big_bytes > sizeof(big_id) && big_bytes > one);
    duro__cache_destroy(c);

    /* an engine over the bound on its own is not kept */
    CHECK_OK(duro__cache_create(100, big_bytes - 1, &c));
    duro__cache_put(c, engine("small", 1));
    duro__cache_put(c, big);
    CHECK_EQ(duro__cache_size(c), 0);
    CHECK_EQ(duro__cache_bytes(c), 0);
    /* and the engines put back after it are kept again */
    duro__cache_put(c, engine("small", 1));
    CHECK(kept(c, "small", 1));
    duro__cache_destroy(c);
}

/* Another execution's engine is not handed out, and taking it destroys
 * it: the bytes go with it. */
TEST(an_engine_of_another_execution_is_dropped)
{
    duro__engine_cache *c = NULL;
    CHECK_OK(duro__cache_create(10, 0, &c));
    duro__cache_put(c, engine("a", 1));
    CHECK(duro__cache_bytes(c) > 0);
    CHECK(duro__cache_take(c, "a", 2) == NULL);
    CHECK_EQ(duro__cache_size(c), 0);
    CHECK_EQ(duro__cache_bytes(c), 0);
    duro__cache_destroy(c);
}

/* A shutdown empties the cache (duro__cache_clear), which stays usable. */
TEST(clear_destroys_every_engine_and_the_cache_stays_usable)
{
    duro__engine_cache *c = NULL;
    CHECK_OK(duro__cache_create(8, 0, &c));
    duro__cache_put(c, engine("a", 1));
    duro__cache_put(c, engine("b", 1));
    duro__cache_put(c, engine("c", 2));
    CHECK_EQ(duro__cache_size(c), 3);
    duro__cache_clear(c);
    CHECK_EQ(duro__cache_size(c), 0);
    CHECK_EQ(duro__cache_bytes(c), 0);
    CHECK(!kept(c, "a", 1));
    CHECK_EQ(duro__cache_cached_events(c, "b", 1), 0);
    duro__cache_put(c, engine("a", 1));
    CHECK(kept(c, "a", 1));
    duro__cache_clear(c);
    duro__cache_clear(c); /* an empty cache: nothing to do */
    duro__cache_destroy(c);
}

TEST_MAIN(T(the_cache_keeps_at_most_capacity_engines),
          T(the_cache_keeps_at_most_max_bytes_of_engines),
          T(an_engine_of_another_execution_is_dropped),
          T(clear_destroys_every_engine_and_the_cache_stays_usable))
