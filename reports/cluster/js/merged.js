// The merged page: a heat-map cell chooses its step on every rank's
// timeline and names the command for its window. Embedded by
// tests/tools/embed_asset.py.
document.addEventListener('DOMContentLoaded',function(){
  function off(s){
    var w=s.closest('[data-tl-offset]');
    return w?+w.getAttribute('data-tl-offset'):0;
  }
  function all(i){
    document.querySelectorAll('[data-tl-sync] section.steptl[data-stage="train"]').forEach(function(s){
      if(s.chooseStep&&!s.closest('[data-tl-apart]'))s.chooseStep(i-off(s),1);
    });
  }
  function one(r,i){
    var s=document.getElementById('r'+r+'-timeline');
    if(s&&s.chooseStep)s.chooseStep(i,1);
  }
  document.querySelectorAll('svg.heatmap [data-i],svg.waitmap [data-i]').forEach(function(e){
    e.style.cursor='pointer';
    e.addEventListener('click',function(){
      var r=e.getAttribute('data-rank'),i=+e.getAttribute('data-i'),o=document.getElementById('rank-offsets'),k=o&&JSON.parse(o.textContent)[r]||0;
      // A bucket the rank enters midway: its first own step's common step.
      if(e.getAttribute('data-apart'))one(r,i);
      else all(Math.max(i,k));
      var h=document.querySelector('svg.heatmap rect.cell[data-rank="'+r+'"][data-i="'+i+'"]')||e;
      var w=h.getAttribute('data-window'),c=document.getElementById('cell-cmd'),j=document.getElementById('rank-traces');
      if(w&&c&&j){
        // The rank's own steps: the command names its own recording's.
        var a=Math.max(0,i-k),n=h.getAttribute('data-last')||a;
        c.textContent='ltrace-bpf report '+JSON.parse(j.textContent)[r]+' --window '+w+' --perfetto rank'+r+'-steps-'+a+'-'+n+'.pftrace';
      }
      var t=document.getElementById('timelines');
      if(t)t.scrollIntoView();
    });
  });
  function hash(){
    var m=/^#step=(\d+)$/.exec(location.hash);
    if(m)all(+m[1]);
  }
  hash();
  window.addEventListener('hashchange',hash);
});
