// cpp_example.cpp - duro from C++: the best of three supplier quotes. The
// orchestration asks three suppliers at once, notes the first answer with
// duro_wait_any() (leaving the others running), waits for all three with
// duro_join(), reserves at the cheapest and races the reservation against a
// durable deadline with duro_select(). Activities may use any C++; the
// orchestration keeps no heap memory across an await (its fiber may be
// discarded without unwinding), so it formats with duro_sprintf() and keeps
// tasks in a std::array. Run: ./cpp_example [sqlite:path.db]
#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "duro.h"
#include "duro/common.h"
#include "duro/provider.h"

namespace
{

const char *const expected_output = "globex at 95: reserved R-globex-widget";

// Activity: a supplier's price for an item, input "supplier:item".
int quote(duro_activity *, const char *input, duro_result *out)
{
    const std::string in = input ? input : "";
    const std::string supplier = in.substr(0, in.find(':'));
    int price = supplier == "acme" ? 120 : supplier == "globex" ? 95 : 110;
    return duro_ok(out, std::to_string(price).c_str());
}

// Activity: reserves the item at a supplier; returns a reservation id.
int reserve(duro_activity *, const char *input, duro_result *out)
{
    std::string id = std::string("R-") + (input ? input : "");
    for (char &c : id)
        if (c == ':')
            c = '-';
    return duro_ok(out, id.c_str());
}

// Orchestration: input is the item's name.
int best_quote(duro_orch *o, const char *item, duro_result *out)
{
    static const std::array<const char *, 3> suppliers = {"acme", "globex",
                                                          "initech"};
    std::array<duro_task *, 3> quotes{};
    for (size_t i = 0; i < quotes.size(); i++)
        quotes[i] = duro_call_activity(
            o, "Quote", duro_sprintf(o, "%s:%s", suppliers[i], item));

    // The first answer in history order; the other two keep running.
    duro_task *first = duro_wait_any(o, quotes[0], quotes[1], quotes[2]);
    for (size_t i = 0; i < quotes.size(); i++)
        if (quotes[i] == first)
            duro_set_custom_status(
                o, duro_sprintf(o, "first quote from %s", suppliers[i]));

    if (duro_join(o, quotes[0], quotes[1], quotes[2]) != DURO_OK)
        return duro_fail(out, "a supplier did not answer");
    size_t best = 0;
    for (size_t i = 1; i < quotes.size(); i++)
        if (std::atoi(duro_task_output(quotes[i])) <
            std::atoi(duro_task_output(quotes[best])))
            best = i;

    duro_task *reservation = duro_call_activity(
        o, "Reserve", duro_sprintf(o, "%s:%s", suppliers[best], item));
    duro_task *deadline = duro_timer(o, 60 * 1000);
    // The loser is dropped (a timer) or cancelled durably (an activity).
    if (duro_select(o, reservation, deadline) != reservation)
        return duro_fail(out, "the reservation did not arrive in time");
    if (duro_task_failed(reservation))
        return duro_failf(out, "reservation failed: %s",
                          duro_task_error(reservation));
    return duro_ok(out,
                   duro_sprintf(o, "%s at %s: reserved %s", suppliers[best],
                                duro_task_output(quotes[best]),
                                duro_task_output(reservation)));
}

int fail(const char *what, int rc)
{
    std::fprintf(stderr, "cpp_example: %s: %s (%s)\n", what, duro_errname(rc),
                 duro_errmsg());
    return 1;
}

} // namespace

int main(int argc, char **argv)
{
    const char *url = argc > 1 ? argv[1] : "sqlite:cpp_example.db";
    duro_registry *reg = nullptr;
    int rc;
    if ((rc = duro_registry_create(&reg)) != DURO_OK ||
        (rc = duro_registry_add_orchestration(
             reg, "BestQuote", nullptr, best_quote, nullptr)) != DURO_OK ||
        (rc = duro_registry_add_activity(reg, "Quote", quote, nullptr)) !=
            DURO_OK ||
        (rc = duro_registry_add_activity(reg, "Reserve", reserve, nullptr)) !=
            DURO_OK)
        return fail("registry", rc);

    duro_runtime *rt = nullptr;
    duro_client *client = nullptr;
    duro_instance_info *info = nullptr;
    int status = 1;
    duro_start_options so;
    duro_start_options_init(&so);
    so.idempotent = 1; // a second run finds the finished instance
    if ((rc = duro_runtime_create(url, reg, nullptr, &rt)) != DURO_OK ||
        (rc = duro_runtime_start(rt)) != DURO_OK ||
        (rc = duro_client_create(url, &client)) != DURO_OK) {
        fail("setup", rc);
    } else if ((rc = duro_client_start(client, "quote-1", "BestQuote", "widget",
                                       &so)) != DURO_OK ||
               (rc = duro_client_wait(client, "quote-1", 30000, &info)) !=
                   DURO_OK) {
        fail("quote-1", rc);
    } else {
        std::printf("quote-1: %s\n", duro_status_name(info->status));
        std::printf("  %s\n", info->output  ? info->output
                              : info->error ? info->error
                                            : "(none)");
        if (info->status == DURO_STATUS_COMPLETED && info->output != nullptr &&
            std::strcmp(info->output, expected_output) == 0)
            status = 0;
        else
            std::fprintf(stderr,
                         "cpp_example: expected Completed with \"%s\"\n",
                         expected_output);
    }
    duro_free(info);
    duro_client_destroy(client);
    duro_runtime_destroy(rt);
    duro_registry_destroy(reg);
    return status;
}
