#include "reports/export/step_timeline.h"

#include <map>

#include "reports/aggregate/step_slices.h"
#include "reports/format/json_escape.h"

namespace lt {

void write_step_timeline_head(std::ostream& out) {
  // Drawn by script only: nothing of it is needed with script off.  Zoom
  // keeps [z0, z1] (fractions of the step); a slice narrower than half a
  // pixel is still drawn half a pixel wide so short ones stay visible.
  out << "<style>section.steptl svg{border:1px solid #ddd;background:#fafafa;display:block;cursor:grab}"
         "section.steptl text{font:10px monospace;pointer-events:none}section.steptl .tl-info{margin-left:12px;"
         "color:#444}</style>\n"
         "<script>document.addEventListener('DOMContentLoaded',function(){"
         "document.querySelectorAll('section.steptl').forEach(function(sec){"
         "var d=JSON.parse(sec.querySelector('script.tl-data').textContent),by={};"
         "d.steps.forEach(function(s){by[s.i]=s;});"
         "var inp=sec.querySelector('input.tl-step'),box=sec.querySelector('div.tl-draw'),"
         "info=sec.querySelector('.tl-info'),W=1100,R=16,cur=null,z0=0,z1=1,NS;"
         // The SVG namespace from the HTML parser: the page holds no URL (self-contained).
         "box.innerHTML='<svg></svg>';NS=box.firstChild.namespaceURI;box.textContent='';"
         "function col(n){var h=2166136261;for(var k=0;k<n.length;k++){h=Math.imul(h^n.charCodeAt(k),16777619)>>>0;}"
         "return 'hsl('+(h%360)+',55%,62%)';}"
         // Ops in one muted grey-blue family, lighter or darker by name: apart from the actions' hues.
         "function opcol(n){var h=2166136261;for(var k=0;k<n.length;k++){h=Math.imul(h^n.charCodeAt(k),16777619)>>>0;}"
         "return 'hsl(210,18%,'+(48+h%28)+'%)';}"
         "function el(t,a){var e=document.createElementNS(NS,t);for(var k in a)e.setAttribute(k,a[k]);return e;}"
         "function draw(){box.textContent='';if(!cur){var v=+inp.value;info.textContent=v<0||v>+inp.max?d.stage+' step "
         "'+v+"
         "' was not recorded by this process (its steps are 0-'+inp.max+')':d.stage+' step '+v+' is not embedded'+"
         "(d.cmd?'; export it: '+d.cmd.replace(/N/g,v):'');sec.setAttribute('data-drawn','');return;}"
         "var t0=performance.now(),dur=Math.max(1,cur.e-cur.b),a=z0*dur,span=(z1-z0)*dur,rows={},order=[],n=0;"
         // GPU work on rows keyed 's'+stream, after the threads.
         "var all=cur.s.concat((cur.o||[]).map(function(x){return [x[0],x[1],x[2],x[3],x[4],2];}),"
         "(cur.g||[]).map(function(x){return [x[0],'s'+x[1],x[2],x[3],x[4],1];}));"
         "all.forEach(function(x){var t=x[1];if(!(t in rows)){rows[t]=0;order.push(t);}"
         "rows[t]=Math.max(rows[t],x[4]+1);});"
         // Allocator events: one row of ticks per thread, keyed 'm'+tid, after the threads' rows.
         "var mk=cur.m||[];mk.forEach(function(x){var t='m'+x[0];if(!(t in rows)){rows[t]=1;order.push(t);}});"
         // c10d calls: one row of ticks per thread, keyed 'c'+tid.
         "var ck=cur.c||[];ck.forEach(function(x){var t='c'+x[0];if(!(t in rows)){rows[t]=1;order.push(t);}});"
         "var y0={},h=0;order.forEach(function(t){y0[t]=h+14;h+=14+rows[t]*R;});"
         "var svg=el('svg',{width:W,height:h+2,'class':'tl','data-step':cur.i,'data-z0':z0,'data-z1':z1});"
         "order.forEach(function(t){var l=el('text',{x:2,y:y0[t]-3});l.textContent=(typeof t=='string'?(t[0]=='m'?"
         "'memory, thread '+t.slice(1):t[0]=='c'?'collectives, thread '+t.slice(1):'GPU stream '+t.slice(1)):"
         "'thread '+t+(t==d.tid?' (loop)':''));"
         "svg.appendChild(l);});"
         "all.forEach(function(x){if(x[3]<a||x[2]>a+span)return;var nm=d.names[x[0]],"
         "x0=(x[2]-a)/span*W,w=Math.max(0.5,(x[3]-x[2])/span*W);if(x0<0){w+=x0;x0=0;}if(x0+w>W)w=W-x0;"
         "var g=el('rect',{'class':['sl','sl gpu','sl op'][x[5]||0],x:x0.toFixed(2),y:y0[x[1]]+x[4]*R,"
         "width:w.toFixed(2),height:R-2,fill:x[5]==2?opcol(nm):col(nm),"
         "'data-name':nm,'data-tid':x[1],'data-b':x[2],'data-e':x[3]});var tt=el('title',{});"
         "tt.textContent=nm+' \\u2014 '+((x[3]-x[2])/1e3).toFixed(1)+' "
         "\\u00b5s';g.appendChild(tt);svg.appendChild(g);n++;"
         "if(w>60){var tx=el('text',{x:(x0+2).toFixed(2),y:y0[x[1]]+x[4]*R+11});"
         "tx.textContent=nm.slice(0,Math.floor(w/7));svg.appendChild(tx);}});"
         "mk.forEach(function(x){if(x[1]<a||x[1]>a+span)return;var r=el('rect',{'class':'mem',x:((x[1]-a)/span*W)"
         ".toFixed(2),y:y0['m'+x[0]],width:1,height:R-2,fill:x[3]&2?'#000':x[2]<0?'#d33':'#2a2','data-tid':x[0],"
         "'data-t':x[1],'data-bytes':x[2]});var tt=el('title',{});tt.textContent=(x[3]&2?'out of memory':x[2]<0?"
         "'freed':'allocated')+' '+Math.abs(x[2])+' B'+(x[3]&1?' (CUDA)':' (CPU)');r.appendChild(tt);"
         "svg.appendChild(r);n++;});"
         // [tid, ns from begin, kind, seq, pg, bytes]: a 2 px purple tick at the call's entry.
         "ck.forEach(function(x){if(x[1]<a||x[1]>a+span)return;var r=el('rect',{'class':'comm',x:((x[1]-a)/span*W)"
         ".toFixed(2),y:y0['c'+x[0]],width:2,height:R-2,fill:'#7b3fb0','data-tid':x[0],'data-t':x[1],'data-kind':x[2],"
         "'data-seq':x[3],'data-pg':x[4],'data-bytes':x[5]});var tt=el('title',{});tt.textContent=x[2]+' #'+x[3]+"
         "' (pg '+x[4]+'), '+x[5]+' B, entered';r.appendChild(tt);svg.appendChild(r);n++;});"
         "box.appendChild(svg);sec.setAttribute('data-drawn',cur.i);"
         // The draw's own time, read by bench/dashboard_page.py.
         "sec.setAttribute('data-draw-ms',(performance.now()-t0).toFixed(2));"
         "var k=d.stage=='train'?off(sec):0;"
         "info.textContent=d.stage+' step '+cur.i+(k?' (common step '+(cur.i+k)+')':'')+': '+(dur/1e6).toFixed(3)+' "
         "ms, '+cur.s.length+' actions'"
         "+(cur.cut?' (cut to the page budget)':'')+(cur.o?', '+cur.o.length+' aten ops'+(cur.ot?' ('+cur.ot+"
         "' more thinned out for the page budget: kept the outermost, longest first)':''):'')"
         "+(cur.ox?' (past the op calls kept: ops missing)':'')+(cur.m?', '+cur.m.length+' memory events'+(cur.mt?' "
         "('+cur.mt+' more thinned out)':''):'')"
         "+(cur.c?', '+cur.c.length+' c10d calls'+(cur.ct?' ('+cur.ct+' more left out)':''):'')"
         "+(cur.g?', '+cur.g.length+' GPU kernels/copies':'')+'; view "
         "'+(a/1e6).toFixed(3)+'..'+((a+span)/1e6).toFixed(3)+"
         "' ms; '+n+' drawn.'+(d.cmd?' Perfetto/Chrome file of this step: '+d.cmd.replace(/N/g,cur.i):cur.w?' "
         "Perfetto/Chrome file of this step: ltrace-bpf report TRACE --window '+cur.w[0]+','+cur.w[1]+' --perfetto '+"
         "d.stage+'-step-'+cur.i+'.pftrace':'');}"
         // Inside a [data-tl-sync] container (the merged page: one timeline per
         // rank), a step chosen here is chosen on the others too; q: do not pass it on.
         // Training steps go across in the ranks' common numbering: a section
         // under [data-tl-offset=K] has common step = own + K; one under
         // [data-tl-apart] (no offset measured) neither sends nor takes them.
         "function off(o){var w=o.closest('[data-tl-offset]');return w?+w.getAttribute('data-tl-offset'):0;}"
         "function apart(o){return d.stage=='train'&&!!o.closest('[data-tl-apart]');}"
         "function choose(i,q){cur=by[i]||null;z0=0;z1=1;inp.value=i;draw();var g=q||apart(sec)?null:"
         "sec.closest('[data-tl-sync]'),t=d.stage=='train';"
         "if(g)g.querySelectorAll('section.steptl[data-stage=\"'+d.stage+'\"]').forEach(function(o){if(o!==sec&&o."
         "chooseStep&&!(t&&o.closest('[data-tl-apart]')))"
         "o.chooseStep(t?i+off(sec)-off(o):i,1);});}"
         "function zoom(f,c){var s=(z1-z0)*f;s=Math.min(1,Math.max(1e-6,s));var m=z0+(z1-z0)*c;"
         "z0=Math.max(0,Math.min(1-s,m-s*c));z1=z0+s;draw();}"
         "function pan(f){var s=z1-z0;z0=Math.max(0,Math.min(1-s,z0+f*s));z1=z0+s;draw();}"
         "inp.addEventListener('change',function(){choose(+inp.value);});"
         "sec.querySelector('.tl-in').addEventListener('click',function(){zoom(0.5,0.5);});"
         "sec.querySelector('.tl-out').addEventListener('click',function(){zoom(2,0.5);});"
         "sec.querySelector('.tl-left').addEventListener('click',function(){pan(-0.25);});"
         "sec.querySelector('.tl-right').addEventListener('click',function(){pan(0.25);});"
         "sec.querySelector('.tl-reset').addEventListener('click',function(){z0=0;z1=1;draw();});"
         "box.addEventListener('wheel',function(ev){ev.preventDefault();var r=box.getBoundingClientRect();"
         "zoom(ev.deltaY<0?0.8:1.25,Math.min(1,Math.max(0,(ev.clientX-r.left)/W)));},{passive:false});"
         "var drag=null;box.addEventListener('mousedown',function(ev){drag=ev.clientX;});"
         "window.addEventListener('mouseup',function(){drag=null;});"
         "box.addEventListener('mousemove',function(ev){if(drag===null)return;var dx=ev.clientX-drag;drag=ev.clientX;"
         "pan(-dx/W);});"
         // The process's step charts of the stage: a bar or point selects its step.
         "var charts=document.getElementById(d.charts);if(charts)charts.querySelectorAll('svg.chart[data-stage=\"'+"
         "d.stage+'\"] [data-i]').forEach(function(e){e.style.cursor='pointer';e.addEventListener('click',function(){"
         "choose(+e.getAttribute('data-i'));sec.scrollIntoView();});});"
         "sec.chooseStep=choose;choose(d.def,1);});});</script>\n";
}

namespace {

// One stage's timeline section within `budget` bytes; returns the bytes its
// slices take (estimated, kTimelineSliceBytes each).
std::size_t write_stage_timeline(const ProcessActions& p, const ProcessSteps& s, const char* stage,
                                 const std::vector<StepRecord>& steps, const std::string& id, std::ostream& out,
                                 const GpuReport* gpu, const OpsReport* ops, const MemoryReport* mem,
                                 const ProcessComm* comm, std::size_t budget, const std::vector<std::size_t>& also,
                                 std::uint64_t window_origin_ns) {
  const bool train = std::string_view(stage) == "train";
  const auto by_begin = sorted_by_begin(p);
  const GpuWork work = gpu ? gpu_work_of(*gpu, p.meta.pid) : GpuWork{};
  const OpWork op_work = ops ? op_work_of(*ops, p.meta.pid) : OpWork{};
  const MemWork mem_work = mem ? mem_work_of(*mem, p.meta.pid) : MemWork{};
  const CommWork comm_work = comm ? comm_work_of(*comm) : CommWork{};
  // Past the aggregator's cap on kept op calls a step's ops are missing:
  // such a step is marked, not shown as one without ops.
  std::uint64_t ops_kept_until = UINT64_MAX;
  if (ops && ops->intervals_dropped) {
    ops_kept_until = 0;
    for (const auto& o : ops->intervals) ops_kept_until = std::max(ops_kept_until, o.begin_ns);
  }
  std::vector<std::size_t> counts(steps.size()), op_counts(steps.size()), mem_counts(steps.size()),
      comm_counts(steps.size());
  for (std::size_t i = 0; i < steps.size(); ++i) {
    counts[i] = step_slices(p, by_begin, steps[i].begin_ns, steps[i].end_ns).size() +
                (work.by_begin.empty() ? 0 : step_gpu_slices(work, steps[i].begin_ns, steps[i].end_ns).size());
    op_counts[i] = step_op_count(op_work, steps[i].begin_ns, steps[i].end_ns);
    mem_counts[i] = step_mem_count(mem_work, steps[i].begin_ns, steps[i].end_ns);
    comm_counts[i] = step_comm_count(comm_work, steps[i].begin_ns, steps[i].end_ns);
  }
  const TimelineChoice c = choose_timeline_steps(steps, counts, budget, kTimelineSlowest, also);
  // c10d calls before the ops (a few per step, each telling), then the ops,
  // then the memory markers in what the ops left.
  const std::size_t slices_free = budget > c.used_bytes ? (budget - c.used_bytes) / kTimelineSliceBytes : 0;
  const auto comm_caps = share_in_priority(c, comm_counts, slices_free);
  std::size_t comm_taken = 0;
  for (auto n : comm_caps) comm_taken += n;
  const std::size_t budget_after_comm = budget - std::min(budget, comm_taken * kTimelineSliceBytes);
  const auto op_caps = timeline_op_caps(c, op_counts, budget_after_comm);
  std::size_t ops_taken = 0;
  for (auto n : op_caps) ops_taken += n;
  const std::size_t slices_left = slices_free - std::min(slices_free, comm_taken);
  const auto mem_caps = share_in_priority(c, mem_counts, slices_left - std::min(slices_left, ops_taken));
  // Names (actions', GPU work's, ops'): only those the embedded steps use, indexed compactly.
  enum Kind { action, gpu_work, op };
  std::map<std::pair<Kind, std::uint32_t>, std::size_t> name_index;
  std::vector<std::pair<Kind, std::uint32_t>> names;
  std::string body;
  std::size_t bytes = 0, thinned_steps = 0, with_ops = 0, mem_thinned = 0, past_cap = 0;
  auto rows = [&](const std::vector<StepSlice>& v, Kind kind) {
    for (std::size_t j = 0; j < v.size(); ++j) {
      const auto& sl = v[j];
      auto [it, fresh] = name_index.try_emplace({kind, sl.action}, names.size());
      if (fresh) names.push_back({kind, sl.action});
      body += (j ? ",[" : "[") + std::to_string(it->second) + "," + std::to_string(sl.tid) + "," +
              std::to_string(sl.begin_ns) + "," + std::to_string(sl.end_ns) + "," + std::to_string(sl.depth) + "]";
    }
    bytes += v.size() * kTimelineSliceBytes;
  };
  for (std::size_t k = 0; k < c.steps.size(); ++k) {
    const std::size_t i = c.steps[k];
    auto slices = step_slices(p, by_begin, steps[i].begin_ns, steps[i].end_ns);
    auto gpu_slices =
        work.by_begin.empty() ? std::vector<StepSlice>{} : step_gpu_slices(work, steps[i].begin_ns, steps[i].end_ns);
    // Ops before the cut below: they nest under the step's actions, all of them.
    auto op_slices =
        op_counts[i] ? step_op_slices(op_work, slices, steps[i].begin_ns, steps[i].end_ns) : std::vector<StepSlice>{};
    const std::size_t op_total = op_slices.size();
    op_slices = thin_ops(std::move(op_slices), op_caps[i]);
    // Over the budget alone (the slowest step only): the actions first, then GPU work, up to the cap.
    const bool cut = i == c.default_step && c.slice_cap && slices.size() + gpu_slices.size() > c.slice_cap;
    if (cut) {
      if (slices.size() > c.slice_cap) slices.resize(c.slice_cap);
      gpu_slices.resize(c.slice_cap - slices.size());
    }
    body += std::string(k ? ",\n" : "") + "{\"i\":" + std::to_string(steps[i].index) +
            ",\"b\":0,\"e\":" + std::to_string(steps[i].duration_ns()) + (cut ? ",\"cut\":1" : "");
    // Other stages' steps have no `--steps`: their `--window`, in seconds
    // after the attach, rounded outward to the microsecond.
    if (!train && window_origin_ns && steps[i].begin_ns >= window_origin_ns) {
      const std::uint64_t b_us = (steps[i].begin_ns - window_origin_ns) / 1000,
                          e_us = (steps[i].end_ns - window_origin_ns + 999) / 1000;
      char w[64];
      std::snprintf(w, sizeof w, ",\"w\":[\"%llu.%06llu\",\"%llu.%06llu\"]",
                    static_cast<unsigned long long>(b_us / 1000000), static_cast<unsigned long long>(b_us % 1000000),
                    static_cast<unsigned long long>(e_us / 1000000), static_cast<unsigned long long>(e_us % 1000000));
      body += w;
    }
    body += ",\"s\":[";
    rows(slices, action);
    body += "]";
    if (!gpu_slices.empty()) {
      body += ",\"g\":[";
      rows(gpu_slices, gpu_work);
      body += "]";
    }
    if (op_total) {
      ++with_ops;
      body += ",\"o\":[";
      rows(op_slices, op);
      body += "]";
      if (op_slices.size() < op_total) {
        ++thinned_steps;
        body += ",\"ot\":" + std::to_string(op_total - op_slices.size());
      }
    }
    if (steps[i].end_ns > ops_kept_until) {
      ++past_cap;
      body += ",\"ox\":1";
    }
    if (mem_counts[i]) {
      // Allocator events: [tid, ns from begin, bytes (< 0 freed), flags (1 CUDA, 2 OOM)].
      const auto marks = step_mem_marks(mem_work, steps[i].begin_ns, steps[i].end_ns, mem_caps[i]);
      body += ",\"m\":[";
      for (std::size_t j = 0; j < marks.size(); ++j)
        body += (j ? ",[" : "[") + std::to_string(marks[j].tid) + "," + std::to_string(marks[j].t_ns) + "," +
                std::to_string(marks[j].bytes) + "," + std::to_string(marks[j].flags) + "]";
      body += "]";
      bytes += marks.size() * kTimelineSliceBytes;
      if (marks.size() < mem_counts[i]) {
        ++mem_thinned;
        body += ",\"mt\":" + std::to_string(mem_counts[i] - marks.size());
      }
    }
    if (comm_counts[i]) {
      // c10d calls: [tid, ns from begin, kind, seq, pg, bytes].
      const auto calls = step_comm_marks(comm_work, steps[i].begin_ns, steps[i].end_ns, comm_caps[i]);
      body += ",\"c\":[";
      for (std::size_t j = 0; j < calls.size(); ++j)
        body += (j ? ",[" : "[") + std::to_string(calls[j]->tid) + "," +
                std::to_string(calls[j]->ts_ns - steps[i].begin_ns) + ",\"" + comm_kind_name(calls[j]->kind) + "\"," +
                std::to_string(calls[j]->seq) + "," + std::to_string(calls[j]->pg) + "," +
                std::to_string(calls[j]->bytes) + "]";
      body += "]";
      bytes += calls.size() * kTimelineSliceBytes;
      if (calls.size() < comm_counts[i]) body += ",\"ct\":" + std::to_string(comm_counts[i] - calls.size());
    }
    body += "}";
  }
  // --steps counts training steps: the other stages' steps have no export command.
  const std::string cmd = train ? "ltrace-bpf report TRACE --steps N-N --perfetto step-N.pftrace" : "";
  const std::string sid = id + (train ? "-timeline" : std::string("-timeline-") + stage);
  out << "<section class=\"steptl\" id=\"" << sid << "\" data-stage=\"" << stage << "\"><h3>Step timeline (" << stage
      << ")</h3>\n<noscript><p class=\"note\">The step timeline is drawn by script: turn script on to see "
      << "it (the tables below do not need it).</p></noscript>\n<p>Step <input class=\"tl-step\" type=\"number\" "
      << "min=\"0\" max=\"" << steps.size() - 1 << "\" value=\"" << steps[c.default_step].index
      << "\"> <button class=\"tl-in\">zoom in</button> <button class=\"tl-out\">zoom out</button> <button "
         "class=\"tl-left\">&larr;</button> <button class=\"tl-right\">&rarr;</button> <button "
         "class=\"tl-reset\">whole step</button><span class=\"tl-info\"></span></p>\n"
      << "<p class=\"note\">One step at full resolution: its actions on their threads, nested by depth, "
      << (ops ? "the aten ops under the actions they ran in (grey-blue), " : "")
      << (mem && !mem_work.by_ts.empty()
              ? "allocator events as ticks on a memory row per thread (green: allocated, red: freed), "
              : "")
      << "and its GPU kernels and copies on stream rows when recorded (wheel or "
         "buttons to zoom, drag to pan). Click a bar or point in the step charts above to choose a step. Embedded: "
      << c.steps.size() << " of " << steps.size() << " steps (the " << kTimelineSlowest
      << " slowest, the median, the first and the last" << (also.empty() ? "" : ", then the other ranks' ones")
      << ", within " << budget / 1024 << " KiB"
      << (c.left_out ? "; " + std::to_string(c.left_out) + " left out for that budget" : std::string()) << ")";
  if (thinned_steps)
    out << "; ops thinned in " << thinned_steps << " of the " << with_ops
        << " steps with ops, for that budget (kept: the outermost calls first, the longest first)";
  if (past_cap)
    out << "; " << past_cap << " embedded steps end after the last op call kept (the first " << kMaxOpIntervals
        << " calls are kept, " << ops->intervals_dropped << " were not): their ops are missing or partial";
  if (mem_thinned)
    out << "; memory events thinned in " << mem_thinned << " steps (kept: out-of-memory events, then the largest)";
  if (train) out << "; any step as a Perfetto/Chrome file: <code>" << cmd << "</code> (N: the step)";
  out << ".</p>\n"
      << "<div class=\"tl-draw\"></div>\n<script type=\"application/json\" class=\"tl-data\">{\"stage\":\"" << stage
      << "\",\"tid\":" << s.tid << ",\"charts\":\"" << id << "-steps\",\"def\":" << steps[c.default_step].index
      << ",\"cmd\":\"" << cmd << "\",\"names\":[";
  for (std::size_t k = 0; k < names.size(); ++k) {
    // json_escape leaves "</" as is: escape '<' so no name can close the block.
    std::string safe;
    const auto [kind, n] = names[k];
    const std::string& name = kind == gpu_work ? gpu->names[n]
                              : kind == op     ? (n < ops->names.size() ? ops->names[n] : std::string())
                                               : p.actions[n].name;
    for (char ch : json_string(name)) safe += ch == '<' ? std::string("\\u003c") : std::string(1, ch);
    out << (k ? "," : "") << safe;
  }
  out << "],\"steps\":[\n" << body << "]}</script>\n</section>\n";
  return bytes;
}

}  // namespace

void write_step_timeline(const ProcessActions& p, const ProcessSteps& s, const std::string& id, std::ostream& out,
                         const GpuReport* gpu, const OpsReport* ops, const MemoryReport* mem, const ProcessComm* comm,
                         const std::vector<std::size_t>& also, std::size_t budget_bytes,
                         std::uint64_t window_origin_ns) {
  // One section per stage with steps; the process's budget is shared: each
  // stage takes at most an equal share of what the stages before it left.
  const auto stages = stages_of(s);
  std::size_t remaining = 0;
  for (const auto& st : stages) remaining += !st.steps->empty();
  std::size_t left = budget_bytes;
  for (const auto& [stage, steps] : stages) {
    if (steps->empty()) continue;
    // `also` holds training-step positions (the merged page's other ranks').
    static const std::vector<std::size_t> none;
    const bool train = std::string_view(stage) == "train";
    const std::size_t used = write_stage_timeline(p, s, stage, *steps, id, out, gpu, ops, mem, comm, left / remaining--,
                                                  train ? also : none, window_origin_ns);
    left -= std::min(left, used);
  }
}

}  // namespace lt
