-- wrk: bad keys, as a proxy forwards them from many client addresses
-- (X-Forwarded-For).  wrk ... -s bad-keys.lua URL -- THREADS ADDRS V6
-- [FROM]: address k of ADDRS (k = FROM, FROM + 1, ... shared out among the
-- threads) is 10.a.b.c below V6, above it 2001:db8:a:b::h, a /64 of its
-- own with a random host part, so that the same /64 comes back with other
-- hosts.  done() says the requests sent, the statuses answered, and how
-- many addresses from FROM on each got one (where the next flood goes on).

local threads = {}

function setup(thread)
    thread:set("id", #threads)
    table.insert(threads, thread)
end

function init(args)
    nthreads = tonumber(args[1])
    addrs = tonumber(args[2])
    v6 = tonumber(args[3])
    k = id + (tonumber(args[4]) or 0)
    sent = 0
    statuses = {}
    headers = {}
    for name, value in pairs(wrk.headers) do
        headers[name] = value
    end
    headers["Content-Type"] = "application/json"
    headers["Authorization"] = "Bearer llmgw_live_not_a_key_at_all"
    body = '{"model":"mock-a","max_tokens":5,'
        .. '"messages":[{"role":"user","content":"hi"}]}'
end

function request()
    local a = k % addrs
    k = k + nthreads
    sent = sent + 1

    if a < v6 then
        headers["X-Forwarded-For"] = string.format("10.%d.%d.%d",
            math.floor(a / 65536) % 256, math.floor(a / 256) % 256, a % 256)
    else
        headers["X-Forwarded-For"] = string.format("2001:db8:%x:%x::%x",
            math.floor(a / 65536), a % 65536, math.random(1, 65535))
    end

    return wrk.format("POST", nil, headers, body)
end

function response(status, hdrs, b)
    statuses[status] = (statuses[status] or 0) + 1
end

function done(summary, latency, requests)
    local total, least, by = 0, nil, {}
    for _, t in ipairs(threads) do
        total = total + t:get("sent")
        least = math.min(least or t:get("sent"), t:get("sent"))
        for _, s in ipairs({ 200, 401, 429, 503 }) do
            by[s] = (by[s] or 0) + (t:get("statuses")[s] or 0)
        end
    end
    io.write(string.format("flood: sent %d; 200 %d, 401 %d, 429 %d, 503 %d;"
        .. " covered %d\n", total, by[200], by[401], by[429], by[503],
        #threads * (least or 0)))
end
